# Known answers for the sealed-secrets blob ("SFES" v1), computed independently of the Swift code
# with pyca/cryptography (python3 sfes-v1-kat.py). SealedSecretsFormatTests holds its output.
import hmac, hashlib, struct
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
def hkdf(ikm, salt, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info.encode()).derive(ikm)
def seal(entries, mv, B, R, salt, nonces):
    flags = 1 if R else 0
    M = hkdf(B+R, salt, "SFES v1 master with run-time share") if R else hkdf(B, salt, "SFES v1 master")
    body = b"SFES" + bytes([1, flags]) + struct.pack(">I", mv) + salt + struct.pack(">H", len(entries))
    for (name, t, value), nonce in zip(entries, nonces):
        n = name.encode()
        k = hkdf(M, salt, "SFES v1 secret " + name)
        ad = b"SFES" + bytes([1, len(n)]) + n + bytes([t]) + struct.pack(">I", mv)
        ct = ChaCha20Poly1305(k).encrypt(nonce, value, ad)
        body += bytes([len(n)]) + n + bytes([t]) + nonce + struct.pack(">I", len(ct)-16) + ct
    I = hkdf(B, salt, "SFES v1 integrity"); C = hkdf(M, salt, "SFES v1 check")
    check = hmac.new(C, body, hashlib.sha256).digest()
    return body + check + hmac.new(I, body + check, hashlib.sha256).digest()
B = bytes(range(32)); salt = bytes(range(0x20, 0x30))
nonces = [bytes([0x40+i]*12) for i in range(3)]
entries = [("apiToken", 1, b"tok-123"), ("retries", 2, struct.pack(">q", -5)), ("debug", 3, b"\x01")]
print(seal(entries, 7, B, b"", salt, nonces).hex())
print(seal(entries[:1], 7, B, b"run-time share 0123456789", salt, nonces[:1]).hex())
