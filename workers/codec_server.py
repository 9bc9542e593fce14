"""``erasure codec-server``: decode payloads for Temporal UI (its "Codec Server" setting).

Temporal UI POSTs ``{"payloads": [...]}`` to ``/decode`` (and ``/encode``) with the namespace in the
``X-Namespace`` header; we answer with the same shape. Serve it on localhost or behind your SSO proxy:
whoever can reach it can read decrypted history, which is why it is never started by default.
"""

from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from workers.codec import EncryptionCodec
from workers.local_secrets import load_secrets
from workers.settings import Settings


def make_handler(codec: EncryptionCodec, allowed_origin: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _cors(self) -> None:
            self.send_header("Access-Control-Allow-Origin", allowed_origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", "Content-Type, X-Namespace")

        def do_OPTIONS(self) -> None:
            self.send_response(200)
            self._cors()
            self.end_headers()

        def do_POST(self) -> None:
            if self.path not in ("/decode", "/encode"):
                self.send_response(404)
                self.end_headers()
                return
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            payloads = [json_format.ParseDict(p, Payload()) for p in body.get("payloads", [])]
            run = codec.decode if self.path == "/decode" else codec.encode
            result = asyncio.run(run(payloads))
            data = json.dumps({"payloads": [json_format.MessageToDict(p) for p in result]}).encode()
            self.send_response(200)
            self._cors()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def serve(settings: Settings, port: int) -> None:
    codec = EncryptionCodec(load_secrets(settings).payload_key)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(codec, settings.ui_url))
    print(f"codec server on http://127.0.0.1:{port} (set it as the Codec Server in Temporal UI)")
    server.serve_forever()
