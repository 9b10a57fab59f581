-- wrk script for kb_endpoints.py: sends `Authorization: Bearer $BENCH_TOKEN` when that variable
-- is set and prints one machine-readable line with the figures at the end of the run.

local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH requests=%d duration_us=%d bytes=%d p50_us=%d p90_us=%d p99_us=%d max_us=%d "
      .. "connect_errors=%d read_errors=%d write_errors=%d status_errors=%d timeouts=%d\n",
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
