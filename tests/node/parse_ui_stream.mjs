// Reads an SSE body (AI SDK UI message stream protocol v1) from stdin and runs it through the
// `ai` package's own client-side pipeline: parseJsonEventStream with uiMessageChunkSchema (the
// strict validation `useChat` applies), then readUIMessageStream (the message assembly).
//
// UI_MESSAGE_JSON (optional, an environment variable): a UIMessage as JSON, the message the stream
// continues (readUIMessageStream's starting `message`), e.g. the assistant message whose tool
// call a continuation stream answers. Unset or empty: the stream starts a new message.
//
// Prints one JSON object: {chunks, message, errors, streamErrors}
//   chunks:       the type of every chunk that passed validation, in order
//   message:      the last UIMessage readUIMessageStream assembled (null when none)
//   errors:       every rejected chunk and every failure while assembling; non-empty -> exit 1
//   streamErrors: the errorText of each protocol `error` chunk (a valid way to end a stream)
import { Readable } from "node:stream";
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

// The schema is a union over every chunk type: report only the problems of the variant whose
// `type` matched (e.g. "Unrecognized key: \"x\""), not one mismatch per other variant.
function describeRejection(error) {
  const issues = error?.cause?.issues;
  if (!Array.isArray(issues)) {
    return String(error?.message ?? error).slice(0, 500);
  }
  const described = [];
  for (const issue of issues) {
    const branches = issue.code === "invalid_union" ? issue.errors : [[issue]];
    const matching = branches.filter(
      (branch) => !branch.some((sub) => sub.path?.length === 1 && sub.path[0] === "type"),
    );
    if (issue.code === "invalid_union" && matching.length === 0) {
      described.push("type: not a chunk type of the protocol");
      continue;
    }
    for (const branch of matching) {
      for (const sub of branch) {
        described.push(sub.path?.length ? `${sub.path.join(".")}: ${sub.message}` : sub.message);
      }
    }
  }
  return described.join("; ");
}

function startingMessage() {
  const json = process.env.UI_MESSAGE_JSON;
  if (!json) {
    return undefined;
  }
  try {
    return JSON.parse(json);
  } catch (error) {
    process.stderr.write(`UI_MESSAGE_JSON is not JSON: ${error.message}\n`);
    process.exit(2);
  }
}

const start = startingMessage();
const errors = [];
const streamErrors = [];
const chunkTypes = [];
const pendingErrorTexts = [];

const parsed = parseJsonEventStream({
  stream: Readable.toWeb(process.stdin),
  schema: uiMessageChunkSchema,
});

// useChat's transport throws on the first rejected chunk; this keeps going so that one run
// reports every rejected chunk, and leaves them out of the assembled message.
const validChunks = parsed.pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (!result.success) {
        errors.push({
          kind: "invalid-chunk",
          chunk: result.rawValue ?? null,
          message: describeRejection(result.error),
        });
        return;
      }
      chunkTypes.push(result.value.type);
      if (result.value.type === "error") {
        pendingErrorTexts.push(result.value.errorText);
      }
      controller.enqueue(result.value);
    },
  }),
);

let message = null;
try {
  for await (const assembled of readUIMessageStream({
    message: start,
    stream: validChunks,
    onError(error) {
      const text = String(error?.message ?? error);
      // readUIMessageStream reports an `error` chunk as new Error(errorText): that is the
      // protocol working, not a failure of the stream.
      if (pendingErrorTexts.length > 0 && pendingErrorTexts[0] === text) {
        pendingErrorTexts.shift();
        streamErrors.push(text);
      } else {
        errors.push({ kind: "processing", message: text });
      }
    },
  })) {
    message = assembled;
  }
} catch (error) {
  errors.push({ kind: "processing", message: String(error?.message ?? error) });
}

process.stdout.write(`${JSON.stringify({ chunks: chunkTypes, message, errors, streamErrors })}\n`);
process.exitCode = errors.length > 0 ? 1 : 0;
