"""Synthetic documents for the ingestion benchmark: one text PDF and many small Markdown files.

    .venv/bin/python bench/corpus.py OUT_DIR [--pages 200] [--markdown 200] [--seed 7]

Prose comes from a seeded generator (a few business topics, varied sentence shapes and
vocabulary), so every page and file differs and a run is reproducible. The PDF is written with
fpdf2's core Helvetica font (Latin-1 only, so the text is ASCII) and has exactly one page per
generated page; the Markdown files have a title and a few `##` sections each.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

TOPICS = {
    "travel": (
        ["travel requests", "hotel bookings", "per diem rates", "rail tickets", "visa letters",
         "the travel desk", "mileage claims", "conference trips", "airport transfers"],
        ["approve", "reimburse", "book", "review", "cap", "reconcile", "audit", "plan"],
    ),
    "security": (
        ["laptop encryption", "access badges", "password managers", "phishing reports",
         "the incident channel", "vendor questionnaires", "backup keys", "audit logs",
         "two-factor tokens"],
        ["rotate", "revoke", "enforce", "monitor", "escalate", "patch", "document", "verify"],
    ),
    "engineering": (
        ["the release train", "feature flags", "code reviews", "on-call rotations",
         "the staging cluster", "database migrations", "load tests", "error budgets",
         "design documents"],
        ["deploy", "roll back", "benchmark", "refactor", "profile", "schedule", "ship", "test"],
    ),
    "finance": (
        ["quarterly forecasts", "purchase orders", "invoices", "the expense policy",
         "budget owners", "cost centres", "payment runs", "currency conversions",
         "vendor contracts"],
        ["approve", "forecast", "reconcile", "pay", "invoice", "book", "report", "freeze"],
    ),
    "people": (
        ["parental leave", "onboarding plans", "performance reviews", "the mentoring scheme",
         "holiday allowances", "remote work", "training budgets", "team offsites",
         "promotion cycles"],
        ["request", "schedule", "discuss", "record", "extend", "support", "plan", "share"],
    ),
}  # fmt: skip
ACTORS = [
    "Each team lead", "The finance office", "A new starter", "The operations group",
    "Every manager", "The platform team", "Our auditors", "The regional office in Lyon",
    "Contractors", "The people team", "A project sponsor", "The support rota", "Department heads",
    "The procurement desk", "Anyone on call"
]  # fmt: skip
TIMES = [
    "before the end of each quarter", "within five working days", "at the start of the month",
    "every other Tuesday", "as soon as practical", "no later than the twentieth",
    "during the annual review", "ahead of the budget meeting", "once a year",
    "before any customer launch", "after every major incident"
]  # fmt: skip
REASONS = [
    "so that nothing is paid twice", "because the regulator asks for it",
    "to keep the numbers comparable between regions", "which saves everyone a round of emails",
    "since the old spreadsheet was lost more than once", "to give new colleagues a fair start",
    "so that the records survive staff changes", "because customers have asked us to",
    "which keeps the tooling simple", "so that nobody has to guess"
]  # fmt: skip
CONNECTIVES = [
    "However,", "In practice,", "For example,", "As a rule,", "In most cases,", "Where possible,",
    "By default,", "Occasionally,", "In addition,", "Strictly speaking,"
]  # fmt: skip
NUMBERS = ["two", "three", "five", "seven", "ten", "twelve", "fifteen", "thirty"]
UNITS = ["days", "weeks", "approvals", "people", "percent", "euros per night", "steps"]


@dataclass(frozen=True)
class Corpus:
    pdf: Path
    markdown: list[Path]
    pages: int


def sentence(rng: random.Random, topic: str) -> str:
    things, verbs = TOPICS[topic]
    thing, other = rng.sample(things, 2)
    shape = rng.randrange(7)
    if shape == 0:
        text = f"{rng.choice(ACTORS)} should {rng.choice(verbs)} {thing} {rng.choice(TIMES)}."
    elif shape == 1:
        text = (
            f"{rng.choice(CONNECTIVES)} {thing} are handled separately from {other}, "
            f"{rng.choice(REASONS)}."
        )
    elif shape == 2:
        text = (
            f"Up to {rng.choice(NUMBERS)} {rng.choice(UNITS)} are allowed for {thing} "
            f"unless {rng.choice(ACTORS).lower()} agrees otherwise."
        )
    elif shape == 3:
        text = (
            f"When {thing} change, {rng.choice(ACTORS).lower()} must {rng.choice(verbs)} "
            f"{other} {rng.choice(TIMES)}, {rng.choice(REASONS)}."
        )
    elif shape == 4:
        text = (
            f"We {rng.choice(verbs)} {thing} in the shared tracker, and the history of {other} "
            f"stays there for {rng.choice(NUMBERS)} years."
        )
    elif shape == 5:
        text = (
            f"Questions about {thing} go to {rng.choice(ACTORS).lower()}; "
            f"{rng.choice(CONNECTIVES).lower()} a short note is enough."
        )
    else:
        text = (
            f"In {rng.randrange(2014, 2027)} we stopped asking people to {rng.choice(verbs)} "
            f"{thing} by hand, {rng.choice(REASONS)}."
        )
    return text[0].upper() + text[1:]


def paragraph(rng: random.Random, topic: str) -> str:
    return " ".join(sentence(rng, topic) for _ in range(rng.randint(3, 6)))


def title(rng: random.Random, topic: str) -> str:
    thing = rng.choice(TOPICS[topic][0])
    return f"{thing[0].upper()}{thing[1:]}: {rng.choice(['notes', 'policy', 'how we work'])}"


def write_pdf(path: Path, pages: int, rng: random.Random) -> None:
    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(auto=False)
    pdf.set_margins(20, 20, 20)
    for number in range(1, pages + 1):
        topic = rng.choice(list(TOPICS))
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.multi_cell(0, 8, f"{number}. {title(rng, topic)}")
        pdf.ln(2)
        pdf.set_font("Helvetica", "", 10.5)
        for _ in range(rng.randint(3, 5)):
            pdf.multi_cell(0, 5.2, paragraph(rng, topic))
            pdf.ln(3)
        if pdf.get_y() > pdf.h - 20:
            raise ValueError(f"page {number} overflows; shorten the paragraphs")
    pdf.output(str(path))


def markdown_note(rng: random.Random, suffix: str = "", sections: int = 4) -> str:
    """A Markdown note: a title (with `suffix`), 2 to `sections` `##` sections, some lists."""
    topic = rng.choice(list(TOPICS))
    parts = [f"# {title(rng, topic)}{suffix}", ""]
    for _ in range(rng.randint(2, sections)):
        parts += [f"## {title(rng, topic)}", "", paragraph(rng, topic), ""]
        if rng.random() < 0.4:
            parts += [f"- {sentence(rng, topic)}" for _ in range(rng.randint(2, 4))] + [""]
    return "\n".join(parts)


def generate(out: Path, pages: int = 200, markdown: int = 200, seed: int = 7) -> Corpus:
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    pdf = out / "handbook.pdf"
    write_pdf(pdf, pages, rng)
    files = []
    for i in range(markdown):
        path = out / f"note-{i:03d}.md"
        path.write_text(markdown_note(rng))
        files.append(path)
    return Corpus(pdf=pdf, markdown=files, pages=pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--markdown", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    corpus = generate(args.out, args.pages, args.markdown, args.seed)
    print(f"{corpus.pdf} ({corpus.pages} pages) and {len(corpus.markdown)} Markdown files")


if __name__ == "__main__":
    main()
