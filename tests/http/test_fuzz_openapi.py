"""Schemathesis against the OpenAPI document, in-process (ASGI) with a development token:
every generated request that the document allows must be answered without a 5xx, accepted
unless a rule the document cannot express refuses it, and answered as documented."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from entrypoints.http.app import create_app
from tests.fakes.tool_servers import FakeToolConnector
from tests.http.chat_support import Holder, ScriptedModels
from tests.http.tool_support import ToolConnectorOverride

EXAMPLES = int(os.environ.get("AP_FUZZ_EXAMPLES", "15"))
REQUEST_TIMEOUT = 120  # seconds; schemathesis' default of 10 fails a loaded machine
# The inbound e-mail webhook takes a raw message: bytes, as an octet stream is generated.
schemathesis.serializer.alias("message/rfc822", "application/octet-stream")

# Rules that depend on the caller's data, not on the request's shape: a storage key must lie
# below the caller's organization, an upload must fit the deployment's limit, a chunk overlap
# is below half the chunk size, an id list names existing records, a model is one the
# deployment runs. They answer 400 with these messages to requests the document allows.
DATA_DEPENDENT = (
    "must be a storage key issued to your organization",
    "exceeds the maximum upload size",
    "chunkOverlap must be at least 0 and less than half of chunkSize",
    "Unknown knowledge base ids",
    "Unknown tag ids",
    "Unknown skill ids",
    "Unknown provider",
    "Unknown local",
    "must have the form provider:model",
    "-dimensional embeddings, not",  # the dimensions a model produces are the model's
    "embeddingDimensions is required for this embedding model",  # an unlisted model's size
    "title can only be given when creating a conversation",
    "cursor is not valid",  # an opaque token only the service issues
    "only with part=image",  # `page` goes with `part=image` alone: one field's rule on another
    "Invalid SKILL.md",  # YAML front matter and the Agent Skills rules on it
    "Invalid skill archive",  # what a zip holds
    "Invalid signature",  # an inbound e-mail is signed with the deployment's secret
    "Invalid cron expression",  # cron's grammar (ranges, steps, names) is no JSON Schema pattern
    "Unknown time zone",  # the IANA database's names
    "Unknown tool server ids",  # an agent's tools name the organization's servers
    "names tool server",  # each server once in an agent's tools: no keyword states it of a key
    "url holds an invalid IPv6 address",  # an address's own grammar
)

# Data-dependent rules inside a body whose error is the contract's generic "Bad Request": told
# apart by each `details` entry's message.
DATA_DEPENDENT_DETAILS = (
    "is not an agent of this organization",  # defaultAgentId
    "is given twice",  # a tool server's header names differing only in case
)
# JSON Schema's `integer` counts `2.0` an integer; the contract takes JSON integers only, which
# no keyword of the document can state. Each field sent so is named with this message.
NOT_A_JSON_INTEGER = "must be a JSON integer"


# Rules across fields of one operation that the document does not state.
ACROSS_FIELDS = {
    ("POST", "/kb/search"): "Valid knowledge base ID is required",
    ("DELETE", "/admin/users"): "Send 1 to 50 ids in all",  # userIds and invitationIds together
}


def data_dependent(ctx, response, case):
    """`positive_data_acceptance`, except for the data-dependent rules above."""
    if response.status_code == 400:
        message = response.json().get("error", "")
        if any(rule in message for rule in DATA_DEPENDENT):
            return None
        details = [str(d.get("message", "")) for d in response.json().get("details") or []]
        unstated = (*DATA_DEPENDENT_DETAILS, NOT_A_JSON_INTEGER)
        if details and all(any(r in d for r in unstated) for d in details):
            return None
        if ACROSS_FIELDS.get((case.method.upper(), case.path)) == message:
            return None
    return positive_data_acceptance(ctx, response, case)


def authenticated(ctx, response, case):
    """The fuzz token holds for the whole run: schemathesis takes a 401 as an answer to valid
    data, so a token the service refused (expired in a long run, no longer accepted by the
    verifier) would otherwise leave every operation untested and the run green."""
    if response.status_code == 401 and case.operation.definition.raw.get("security") != []:
        raise AssertionError(f"401 to the fuzz token: {response.text[:200]}")
    return None


@pytest.fixture(scope="module")
def api(settings, database, idp):
    # Inbound e-mail on, so that `source: "email"` and its webhook are exercised too.
    mail = {"inbound_email_domain": "in.example.test", "inbound_email_secret": "f" * 40}
    # The fake tool connector: a generated tool server URL is never connected to.
    app = create_app(
        dataclasses.replace(settings, **mail),
        database,
        ScriptedModels(Holder()),
        ToolConnectorOverride(FakeToolConnector()),
    )
    schema = schemathesis.openapi.from_asgi("/schema/openapi.json", app)
    schema.config.generation.update(codec=os.environ.get("AP_FUZZ_CODEC", "utf-8"), allow_x00=False)
    # Valid for a day: `make fuzz` runs far longer than CI's examples.
    token = idp.issue(user_id="user_fuzz", org_id="org_fuzz", role="admin", ttl=24 * 3600)
    return schema, {"Authorization": f"Bearer {token}"}


def fuzz(operation, headers: dict[str, str], failures: dict[str, str], calls: Counter[str]) -> None:
    """Run `EXAMPLES` generated requests of one operation with every check; the first failure
    is kept under the operation's label (no shrinking: the run stays bounded), and the
    requests made are counted under it."""

    @given(case=operation.as_strategy())
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
        # The same examples on every run, so that CI is repeatable; AP_FUZZ_RANDOM=1 explores.
        derandomize=not os.environ.get("AP_FUZZ_RANDOM"),
    )
    def check(case):
        calls[operation.label] += 1
        try:
            case.call_and_validate(
                headers=headers,
                excluded_checks=[positive_data_acceptance],
                additional_checks=[data_dependent, authenticated],
                # A search embeds its query with the local model, loaded on first use: slow
                # on a busy 2-core runner.
                timeout=REQUEST_TIMEOUT,
            )
        except (AssertionError, BaseExceptionGroup) as failure:
            failures.setdefault(operation.label, f"{type(failure).__name__}: {failure}"[:3000])

    check()


def test_the_document_tells_the_truth(api):
    schema, headers = api
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    failures: dict[str, str] = {}
    calls: Counter[str] = Counter()
    for operation in operations:
        fuzz(operation, headers, failures, calls)
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
    # Every operation of the document was called, with the token.
    assert set(calls) == {operation.label for operation in operations}
