#!/usr/bin/env python3
"""GitHub's OIDC token endpoint, as a job sees it: `oidc_stub.py PORT
REQUEST_TOKEN ID_TOKEN LOG`. GET /token?...&audience=A answers
{"count": 1, "value": ID_TOKEN} and logs "audience=A authorization=ok" (or
=bad when the Authorization header is not `bearer REQUEST_TOKEN`);
GET /ready answers 200."""
import json
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

PORT, REQUEST_TOKEN, ID_TOKEN, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/token":
            query = urllib.parse.parse_qs(url.query)
            auth = self.headers.get("Authorization", "")
            scheme, _, token = auth.partition(" ")
            ok = scheme.lower() == "bearer" and token == REQUEST_TOKEN
            with open(LOG, "a", encoding="utf-8") as log:
                log.write(f"audience={','.join(query.get('audience', []))} "
                          f"authorization={'ok' if ok else 'bad'}\n")
            body = json.dumps({"count": 1, "value": ID_TOKEN} if ok else {"message": "no"})
            self.send_response(200 if ok else 401)
        else:
            body = "{}"
            self.send_response(200 if url.path == "/ready" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
