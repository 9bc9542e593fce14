#!/usr/bin/env node
// Checks an erasure receipt, a forget receipt or a physical attestation with Node's standard library only,
// written from docs/verification-and-receipts.md ("Checking a receipt without this project"), so anyone can
// check a document without Python or this project's code:
//
//   node verify.mjs DOCUMENT.json PUBLIC_KEY.pem [--receipt RECEIPT.json]
//
// The document is {"receipt": BODY, "signature": {"alg": "Ed25519", "key_id", "value"}}; the signature is
// Ed25519 over the RFC 8785 (JSON Canonicalization Scheme) form of BODY, which says so in its own
// "canonicalization": "RFC8785" field. Documents are float-free by construction, so RFC 8785 here is: object
// keys sorted by UTF-16 code units, strings and integers as JSON.stringify writes them, no whitespace.
// With --receipt, DOCUMENT is an attestation and must be about that (valid) receipt: the same request id,
// and receipt_sha256 the SHA-256 of the receipt's canonical body.
//
// Exit codes: 0 valid; 1 invalid (altered, forged, another key, not linked); 2 cannot check (usage, an
// unreadable file, not JSON, not a document of this form, a key that is not Ed25519, or an old-format
// document issued before RFC 8785: `erasure receipt verify` checks those).

import { createHash, createPublicKey, verify } from "node:crypto";
import { readFileSync } from "node:fs";

const CANONICALIZATION = "RFC8785";
const SCHEMAS = ["erasure-receipt/3", "forget-receipt/1", "physical-attestation/1"];

class Invalid extends Error {}
class CannotCheck extends Error {}

// ----- strict JSON: a key given twice is refused (JSON.parse keeps the last silently), numbers are noted --

function parseJson(text) {
  let i = 0;
  const nonIntegers = [];
  const bad = (why) => {
    throw new CannotCheck(`not a JSON document: ${why} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const string = () => {
    const start = i++;
    while (i < text.length && text[i] !== '"') {
      if (text.charCodeAt(i) < 0x20) bad("a control character in a string");
      i += text[i] === "\\" ? 2 : 1;
    }
    if (i++ >= text.length) bad("an unterminated string");
    return JSON.parse(text.slice(start, i)); // decodes (and checks) the escapes
  };
  const number = () => {
    const m = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    m.lastIndex = i;
    const found = m.exec(text);
    if (!found) bad("a malformed number");
    i = m.lastIndex;
    const n = Number(found[0]);
    if (found[1] !== undefined || found[2] !== undefined || !Number.isSafeInteger(n)) nonIntegers.push(found[0]);
    return n;
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") return object();
    if (c === "[") return array();
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]]) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    return bad("an unexpected character");
  };
  const array = () => {
    i++;
    const out = [];
    ws();
    if (text[i] === "]") return i++, out;
    for (;;) {
      out.push(value());
      ws();
      const c = text[i++];
      if (c === "]") return out;
      if (c !== ",") bad("expected ',' or ']'");
    }
  };
  const object = () => {
    i++;
    const out = Object.create(null); // a "__proto__" key is an ordinary key
    ws();
    if (text[i] === "}") return i++, out;
    for (;;) {
      ws();
      if (text[i] !== '"') bad("expected a key");
      const key = string();
      if (Object.hasOwn(out, key)) throw new Invalid(`duplicate key ${JSON.stringify(key)} in a JSON object`);
      ws();
      if (text[i++] !== ":") bad("expected ':'");
      out[key] = value();
      ws();
      const c = text[i++];
      if (c === "}") return out;
      if (c !== ",") bad("expected ',' or '}'");
    }
  };
  const parsed = value();
  ws();
  if (i !== text.length) bad("text after the document");
  return { value: parsed, nonIntegers };
}

// ----- RFC 8785 for float-free JSON ----------------------------------------------------------------------

function canonical(v) {
  if (v === null || typeof v === "boolean" || typeof v === "number") return JSON.stringify(v);
  if (typeof v === "string") {
    if (!v.isWellFormed()) throw new Invalid("a string with a lone surrogate (not I-JSON)");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  const keys = Object.keys(v).sort(); // the default sort compares UTF-16 code units: RFC 8785's order
  return `{${keys.map((k) => `${canonical(k)}:${canonical(v[k])}`).join(",")}}`;
}

const sha256 = (data) => createHash("sha256").update(data).digest("hex");

// ----- the documents -------------------------------------------------------------------------------------

function readText(path) {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new CannotCheck(`cannot read ${path}: ${err.code ?? err.message}`);
  }
}

function loadKey(path) {
  let key;
  try {
    key = createPublicKey(readText(path));
  } catch (err) {
    if (err instanceof CannotCheck) throw err;
    throw new CannotCheck(`${path} is not a PEM public key`);
  }
  if (key.asymmetricKeyType !== "ed25519") throw new CannotCheck(`${path} is not an Ed25519 public key`);
  const raw = Buffer.from(key.export({ format: "jwk" }).x, "base64url");
  return { key, keyId: sha256(raw).slice(0, 16) };
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

// The verified body of the document at `path`, or an exception saying why not.
function check(path, { key, keyId }) {
  const { value: doc, nonIntegers } = parseJson(readText(path));
  if (!isObject(doc) || Object.keys(doc).sort().join() !== "receipt,signature") {
    throw new CannotCheck("not a receipt document (expected exactly 'receipt' and 'signature')");
  }
  const { receipt: body, signature: sig } = doc;
  if (!isObject(body) || !isObject(sig)) throw new CannotCheck("'receipt' and 'signature' must be objects");
  if (!Object.hasOwn(body, "canonicalization")) {
    throw new CannotCheck(
      `old format: ${body.schema} ${body.request_id} was signed before RFC 8785 (no "canonicalization" field); ` +
        "check it with `erasure receipt verify`",
    );
  }
  if (body.canonicalization !== CANONICALIZATION) {
    throw new CannotCheck(`unknown canonicalization ${JSON.stringify(body.canonicalization)}`);
  }
  if (!SCHEMAS.includes(body.schema)) {
    throw new CannotCheck(`unknown schema ${JSON.stringify(body.schema)} (this verifier knows ${SCHEMAS.join(", ")})`);
  }
  if (sig.alg !== "Ed25519") throw new Invalid(`unsupported signature algorithm ${JSON.stringify(sig.alg)}`);
  if (sig.key_id !== keyId) throw new Invalid("signed with another key (key id does not match this public key)");
  if (nonIntegers.length) {
    throw new Invalid(`a non-integer number (${nonIntegers[0]}): RFC 8785 documents of this signer carry none`);
  }
  const value = typeof sig.value === "string" ? sig.value : "";
  const raw = Buffer.from(value, "base64");
  if (raw.length !== 64 || raw.toString("base64") !== value) {
    throw new Invalid("the signature is not 64 bytes in canonical base64");
  }
  if (!verify(null, Buffer.from(canonical(body), "utf8"), key, raw)) {
    throw new Invalid("signature does not match the document's contents (altered or forged)");
  }
  return body;
}

function main(argv) {
  const args = argv.slice(2);
  const at = args.indexOf("--receipt");
  const receiptPath = at >= 0 ? args[at + 1] : undefined;
  const [path, keyPath, ...rest] = at >= 0 ? args.filter((_, n) => n !== at && n !== at + 1) : args;
  if (!path || !keyPath || rest.length || (at >= 0 && !receiptPath)) {
    throw new CannotCheck("usage: node verify.mjs DOCUMENT.json PUBLIC_KEY.pem [--receipt RECEIPT.json]");
  }
  const key = loadKey(keyPath);
  const body = check(path, key);
  let linked = "";
  if (receiptPath !== undefined) {
    if (body.schema !== "physical-attestation/1") throw new CannotCheck("--receipt goes with a physical attestation");
    const receipt = check(receiptPath, key);
    if (body.request_id !== receipt.request_id) {
      throw new Invalid(`not linked: the attestation is for ${body.request_id}, the receipt for ${receipt.request_id}`);
    }
    if (body.receipt_sha256 !== sha256(Buffer.from(canonical(receipt), "utf8"))) {
      throw new Invalid("not linked: receipt_sha256 is not the SHA-256 of this receipt's canonical body");
    }
    linked = `, linked to the receipt ${receiptPath}`;
  }
  return `valid: ${body.schema} ${body.request_id} signed by key ${key.keyId} (RFC 8785)${linked}`;
}

try {
  console.log(main(process.argv));
  process.exitCode = 0;
} catch (err) {
  if (err instanceof Invalid) {
    console.log(`INVALID: ${err.message}`);
    process.exitCode = 1;
  } else if (err instanceof CannotCheck) {
    console.log(`CANNOT CHECK: ${err.message}`);
    process.exitCode = 2;
  } else {
    console.log(`CANNOT CHECK: ${err.stack}`); // a bug here: never "valid"
    process.exitCode = 2;
  }
}
