"""TLS for the tests' own https servers on localhost."""

import shutil
import ssl
import subprocess

import pytest


def serve_over_tls(server, tmp_path):
    """Wrap ``server``'s socket in TLS with a certificate for ``localhost``
    made in ``tmp_path`` (skips without openssl); the certificate's path,
    for the client to trust."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(cert, key)
    server.socket = server_side.wrap_socket(server.socket, server_side=True)
    return cert
