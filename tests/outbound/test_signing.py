import json
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from outbound import generate_secret, signature_header


def headers_for(secrets, body, msg_id="msg_1"):
    ts = int(time.time())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature_header(secrets, msg_id=msg_id, timestamp=ts, body=body),
    }


def test_signature_verifies_with_the_standardwebhooks_library():
    secret = generate_secret()
    body = json.dumps({"type": "partition.ready", "data": {"partition": "2026-11-28"}})
    assert Webhook(secret).verify(body, headers_for([secret], body))["type"] == "partition.ready"


def test_tampered_body_fails_verification():
    secret = generate_secret()
    headers = headers_for([secret], '{"a": 1}')
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify('{"a": 2}', headers)


def test_rotation_signs_with_both_secrets():
    old, new = generate_secret(), generate_secret()
    headers = headers_for([new, old], "{}")
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(old).verify("{}", headers)
    Webhook(new).verify("{}", headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify("{}", headers)
