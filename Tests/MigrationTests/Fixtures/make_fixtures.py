#!/usr/bin/env python3
"""Writes the iMAS Secure Foundation fixtures of MigrationTests, independently of the Swift code.

The byte layouts are those of the original library (IMSCryptoUtils / IMSCryptoManager /
IMSKeychain):

  blob    = IV(16) || AES-CBC(K, P || c || PKCS#7 padding),  c = (-sum(P)) mod 256
  KEK     = PBKDF2-HMAC-SHA256(UTF-8 secret, salt, 1000 rounds, 32 bytes)
  answers = the answers joined with no separator
  store   = binary plist {service: {account: data}}; the crypto manager's entries under
            "org.mitre.imas.crypto-manager": salt, shared-key.passcode, shared-key.security-answers,
            security-questions (compact JSON, every byte XOR 0x9C), gen-item, gen-itemk

Needs the `cryptography` package (python3-cryptography). Deterministic: fixed keys, IVs and salt.
Run from anywhere: python3 Tests/MigrationTests/Fixtures/make_fixtures.py
"""
import hashlib
import json
import os
import plistlib

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

HERE = os.path.dirname(os.path.abspath(__file__))


def det(label, n):
    """Deterministic bytes for fixed IVs and keys."""
    out = b""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:n]


def checksum(p):
    return (-sum(p)) % 256


def cbc(key, iv, data):
    enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
    return enc.update(data) + enc.finalize()


def pkcs7(data):
    n = 16 - len(data) % 16
    return data + bytes([n]) * n


def seal(key, iv, p):
    """IMSCryptoUtilsSimpleEncryptData: IV || CBC(P || checksum, PKCS#7)."""
    return iv + cbc(key, iv, pkcs7(p + bytes([checksum(p)])))


def kek(secret, salt):
    return PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=1000).derive(secret)


def main():
    vectors = []
    key256 = det("key256", 32)
    for n in [0, 1, 14, 15, 16, 31, 32, 250]:
        p = det(f"plain{n}", n)
        vectors.append({"name": f"aes256-{n}", "key": key256.hex(), "blob": seal(key256, det(f"iv{n}", 16), p).hex(),
                        "plaintext": p.hex()})
    key128 = det("key128", 16)
    p = b"AES-128 as kCCAlgorithmAES128 with a 16-byte key"
    vectors.append({"name": "aes128", "key": key128.hex(), "blob": seal(key128, det("iv128", 16), p).hex(), "plaintext": p.hex()})
    key192 = det("key192", 24)
    vectors.append({"name": "aes192", "key": key192.hex(), "blob": seal(key192, det("iv192", 16), p).hex(), "plaintext": p.hex()})

    # Rejected: a wrong checksum with valid padding, and bad padding (the checksum would be right).
    p = b"twelve bytes"
    iv = det("ivbad", 16)
    bad_sum = iv + cbc(key256, iv, pkcs7(p + bytes([(checksum(p) + 1) % 256])))
    vectors.append({"name": "bad-checksum", "key": key256.hex(), "blob": bad_sum.hex(), "plaintext": None})
    body = p + bytes([checksum(p)])
    bad_pad = iv + cbc(key256, iv, body + bytes([3, 3, 2]))                   # 13 + 3 = 16, last byte 2, but then 3 != 2
    vectors.append({"name": "bad-padding", "key": key256.hex(), "blob": bad_pad.hex(), "plaintext": None})
    zero_pad = iv + cbc(key256, iv, body + bytes([0, 0, 0]))
    vectors.append({"name": "zero-padding", "key": key256.hex(), "blob": zero_pad.hex(), "plaintext": None})
    long_pad = iv + cbc(key256, iv, body + bytes([17, 17, 17]))
    vectors.append({"name": "padding-over-a-block", "key": key256.hex(), "blob": long_pad.hex(), "plaintext": None})
    # Only padding (no checksum byte): a full block of 16s.
    only_pad = iv + cbc(key256, iv, bytes([16]) * 16)
    vectors.append({"name": "no-checksum-byte", "key": key256.hex(), "blob": only_pad.hex(), "plaintext": None})
    # A wrong key on a good blob.
    good = seal(key256, iv, b"secret")
    vectors.append({"name": "wrong-key", "key": det("other", 32).hex(), "blob": good.hex(), "plaintext": None})

    salt = det("salt", 32)
    kdf = [{"secret": "1234", "salt": salt.hex(), "key": kek(b"1234", salt).hex()},
           {"secret": "RexLyon", "salt": salt.hex(), "key": kek(b"RexLyon", salt).hex()},
           {"secret": "p\u00e4sscode", "salt": "00", "key": kek("p\u00e4sscode".encode(), b"\x00").hex()}]
    with open(os.path.join(HERE, "vectors.json"), "w") as f:
        json.dump({"blobs": vectors, "pbkdf2": kdf}, f, indent=1, sort_keys=True)
        f.write("\n")

    # A whole legacy installation: passcode "1234", answers "Rex", "Lyon".
    sk = det("shared-key", 32)
    kp = kek(b"1234", salt)
    ka = kek(b"RexLyon", salt)
    questions = json.dumps(["First pet?", "Birth town?"], separators=(",", ":")).encode()
    gen_secret = b"qwertyuiopasdfghjklx"
    store = {
        "org.mitre.imas.crypto-manager": {
            "salt": salt,
            "shared-key.passcode": seal(kp, det("iv-p", 16), sk),
            "shared-key.security-answers": seal(ka, det("iv-a", 16), sk),
            "security-questions": bytes(b ^ 0x9C for b in questions),
            "gen-item": seal(ka, det("iv-g", 16), gen_secret),
            "gen-itemk": seal(kp, det("iv-gk", 16), ka),
        },
        "mail": {"alice": b"alice-pw", "bob": b"bob-pw"},
        "api": {"token": seal(sk, det("iv-t", 16), b"s3cr3t-token"), "refresh": seal(sk, det("iv-r", 16), b"")},
    }
    with open(os.path.join(HERE, "imas-keychain.bplist"), "wb") as f:
        plistlib.dump(store, f, fmt=plistlib.FMT_BINARY, sort_keys=True)
    # The same keychain with one secure value damaged (one bit of its last block).
    damaged = json.loads(json.dumps({k: {a: v.hex() for a, v in d.items()} for k, d in store.items()}))
    damaged = {k: {a: bytes.fromhex(v) for a, v in d.items()} for k, d in damaged.items()}
    token = bytearray(damaged["api"]["token"])
    token[-1] ^= 0x01
    damaged["api"]["token"] = bytes(token)
    with open(os.path.join(HERE, "imas-keychain-damaged.bplist"), "wb") as f:
        plistlib.dump(damaged, f, fmt=plistlib.FMT_BINARY, sort_keys=True)
    # After a passcode change (IMSCryptoManagerUpdatePasscode, "1234" to "5678"): the application
    # key is re-wrapped under the new passcode, the GenItem key (gen-itemk) is not.
    kp2 = kek(b"5678", salt)
    changed = {k: dict(d) for k, d in store.items()}
    changed["org.mitre.imas.crypto-manager"]["shared-key.passcode"] = seal(kp2, det("iv-p2", 16), sk)
    with open(os.path.join(HERE, "imas-keychain-passcode-changed.bplist"), "wb") as f:
        plistlib.dump(changed, f, fmt=plistlib.FMT_BINARY, sort_keys=True)
    # After a change of answers (IMSCryptoManagerUpdateSecurityQuestionsAndAnswers, to "Max",
    # "Paris"): the application key is re-wrapped under the new answers, gen-item stays under
    # the old answers key (and gen-itemk still wraps that key under the passcode "1234").
    ka2 = kek(b"MaxParis", salt)
    changed = {k: dict(d) for k, d in store.items()}
    changed["org.mitre.imas.crypto-manager"]["shared-key.security-answers"] = seal(ka2, det("iv-a2", 16), sk)
    with open(os.path.join(HERE, "imas-keychain-answers-changed.bplist"), "wb") as f:
        plistlib.dump(changed, f, fmt=plistlib.FMT_BINARY, sort_keys=True)
    # Data from IMSCryptoManagerEncryptData and a file from IMSCryptoUtilsEncryptFileToPath.
    with open(os.path.join(HERE, "note.imas"), "wb") as f:
        f.write(seal(sk, det("iv-note", 16), b"Meeting notes: the legacy data comes across."))
    report = b"".join(det(f"report{i}", 32) for i in range(40))   # 1280 bytes
    with open(os.path.join(HERE, "report.imas"), "wb") as f:
        f.write(seal(sk, det("iv-report", 16), report))
    with open(os.path.join(HERE, "report.plain"), "wb") as f:
        f.write(report)
    with open(os.path.join(HERE, "shared-key.hex"), "w") as f:
        f.write(sk.hex() + "\n")


if __name__ == "__main__":
    main()
