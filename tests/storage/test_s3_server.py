"""The S3 test server fixture itself (see conftest.py): it serves, checks signatures with the
credentials it hands out, stores objects under ``data_dir/<bucket>/<key>``, makes buckets, and
survives kill()/restart() with its data.

No S3 client library here: requests are signed with a minimal SigV4 signer over the stdlib.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import os
import socket
from datetime import datetime, timezone

import pytest


def _request(server, method: str, path: str, body: bytes = b"", query: str = "", sign: bool = True, secret=None):
    """One HTTP request to the server; path and query must need no percent-encoding.

    Returns (status, body). Signed with AWS Signature Version 4 unless ``sign`` is false.
    """
    host = f"127.0.0.1:{server.port}"
    headers = {}
    if sign:
        amz_date = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        payload_hash = hashlib.sha256(body).hexdigest()
        signed = {"host": host, "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
        names = sorted(signed)
        canonical_query = "&".join(sorted(p if "=" in p else p + "=" for p in query.split("&") if p))
        canonical = "\n".join(
            [method, path, canonical_query, "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names), payload_hash]
        )
        scope = f"{amz_date[:8]}/{server.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        key = ("AWS4" + (secret or server.secret_access_key)).encode()
        for part in (amz_date[:8], server.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers = {
            "x-amz-content-sha256": payload_hash,
            "x-amz-date": amz_date,
            "Authorization": f"AWS4-HMAC-SHA256 Credential={server.access_key_id}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}",
        }
    conn = http.client.HTTPConnection(host, timeout=5)
    try:
        conn.request(method, path + ("?" + query if query else ""), body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_serves_the_port_and_refuses_unsigned_requests(s3_server):
    assert s3_server.endpoint == f"http://127.0.0.1:{s3_server.port}"
    assert s3_server.region == "us-east-1"
    assert (s3_server.data_dir / s3_server.bucket).is_dir()
    status, body = _request(s3_server, "GET", f"/{s3_server.bucket}", sign=False)
    assert status == 403, body
    assert b"AccessDenied" in body


def test_signed_requests_store_objects_in_the_data_dir(s3_server):
    bucket = s3_server.bucket
    assert _request(s3_server, "PUT", f"/{bucket}/dir/key.bin", body=b"hello s3")[0] == 200
    assert (s3_server.data_dir / bucket / "dir" / "key.bin").read_bytes() == b"hello s3"
    assert _request(s3_server, "GET", f"/{bucket}/dir/key.bin") == (200, b"hello s3")
    status, body = _request(s3_server, "GET", f"/{bucket}", query="list-type=2")
    assert status == 200 and b"<Key>dir/key.bin</Key>" in body, body
    status, body = _request(s3_server, "GET", f"/{bucket}/dir/key.bin", secret="wrong-secret")
    assert status == 403 and b"SignatureDoesNotMatch" in body, body


def test_new_bucket(s3_server):
    name = s3_server.new_bucket("second-bucket")
    assert name == "second-bucket" and (s3_server.data_dir / name).is_dir()
    status, body = _request(s3_server, "GET", f"/{name}", query="list-type=2")
    assert status == 200 and b"<KeyCount>0</KeyCount>" in body, body
    fresh = s3_server.new_bucket()
    assert fresh not in (name, s3_server.bucket) and (s3_server.data_dir / fresh).is_dir()
    with pytest.raises(FileExistsError):
        s3_server.new_bucket(name)
    status, body = _request(s3_server, "GET", "/no-such-bucket", query="list-type=2")
    assert status == 404 and b"NoSuchBucket" in body, body


def test_kill_and_restart_keep_port_and_data(s3_server):
    bucket, endpoint = s3_server.bucket, s3_server.endpoint
    assert _request(s3_server, "PUT", f"/{bucket}/survivor", body=b"still here")[0] == 200
    s3_server.kill()
    assert not s3_server.is_running()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s3_server.port), timeout=1).close()
    s3_server.restart()
    assert s3_server.is_running() and s3_server.endpoint == endpoint
    assert _request(s3_server, "GET", f"/{bucket}/survivor") == (200, b"still here")
    s3_server.restart()  # restart() of a running server kills it first
    assert _request(s3_server, "GET", f"/{bucket}/survivor") == (200, b"still here")


def test_s3_env(s3_server, s3_env):
    assert s3_env is s3_server and s3_server.is_running()
    assert os.environ["AWS_ENDPOINT_URL"] == os.environ["AWS_ENDPOINT"] == s3_server.endpoint
    assert os.environ["AWS_ACCESS_KEY_ID"] == s3_server.access_key_id
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == s3_server.secret_access_key
    assert os.environ["AWS_REGION"] == "us-east-1"
    assert os.environ["AWS_ALLOW_HTTP"] == "true"
