/**
 * Bucket keys: `<prefix>{<organization>}:<endpoint>`, each name percent-encoded so that the key says which bucket it
 * is and nothing else. The braces make the organization Redis Cluster's hash tag: every bucket of an organization
 * lives in one slot, and a batch of them can go to Redis in one script call.
 *
 * The encoding escapes `%` (so it can be decoded, hence injective), `{` and `}` (so no organization can end the hash
 * tag early or open another), `:` (so tools that split keys on colons show prefix, organization, endpoint) and lone
 * UTF-16 surrogates (Redis keys are UTF-8 bytes, and UTF-8 cannot carry them: two names differing only there would
 * otherwise both become U+FFFD and share a key). Everything else, spaces and unicode included, is kept as is.
 */

const NEEDS_ESCAPE = /[%{}:\uD800-\uDFFF]/;

/** The percent-encoding of one name (organization or endpoint); the identity for most names. */
export function encodeName(name: string): string {
  if (!NEEDS_ESCAPE.test(name)) return name;
  let out = '';
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code === 0x25) out += '%25';
    else if (code === 0x7b) out += '%7B';
    else if (code === 0x7d) out += '%7D';
    else if (code === 0x3a) out += '%3A';
    else if (code >= 0xd800 && code <= 0xdfff) {
      const next = name.charCodeAt(i + 1);
      if (code <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        // A well-formed pair is an ordinary character beyond the BMP.
        out += name[i] + (name[i + 1] as string);
        i++;
      } else {
        out += `%u${code.toString(16).toUpperCase()}`;
      }
    } else out += name[i];
  }
  return out;
}

/** Inverse of `encodeName` (for tests and for reading keys back); throws on a string it could not have produced. */
export function decodeName(encoded: string): string {
  let out = '';
  for (let i = 0; i < encoded.length; i++) {
    const char = encoded[i] as string;
    if (char !== '%') {
      out += char;
      continue;
    }
    const wide = encoded[i + 1] === 'u';
    const digits = encoded.slice(wide ? i + 2 : i + 1, wide ? i + 6 : i + 3);
    if (!/^[0-9A-F]+$/.test(digits) || digits.length !== (wide ? 4 : 2)) {
      throw new Error(`ratecard: not an encoded name: ${JSON.stringify(encoded)}`);
    }
    out += String.fromCharCode(Number.parseInt(digits, 16));
    i += wide ? 5 : 2;
  }
  return out;
}

/** The Redis key of a bucket. Endpoints are few (rule keys), so their encodings are remembered. */
export class KeyEncoder {
  private readonly endpoints = new Map<string, string>();

  constructor(readonly prefix: string) {}

  /** The encoded organization, which is also the key's hash tag. */
  tag(organization: string): string {
    return encodeName(organization);
  }

  key(tag: string, endpoint: string): string {
    let encoded = this.endpoints.get(endpoint);
    if (encoded === undefined) {
      encoded = encodeName(endpoint);
      // A bound, so that a caller passing raw paths as endpoints cannot grow the map without end.
      if (this.endpoints.size < 1024) this.endpoints.set(endpoint, encoded);
    }
    return `${this.prefix}{${tag}}:${encoded}`;
  }
}

/** CRC16-CCITT (XMODEM), the checksum Redis Cluster maps keys to slots with, as a 256-entry table. */
const CRC_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

function crcByte(crc: number, byte: number): number {
  return ((crc << 8) & 0xffff) ^ (CRC_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
}

/**
 * The cluster slot of a key whose hash tag is `tag`: CRC16 of the tag's UTF-8 bytes, modulo 16384. The bytes are
 * produced on the fly, so nothing is allocated. `tag` must be non-empty and well-formed (encodeName's output is);
 * Redis hashes the whole key for an empty tag, which `slotOfKey` handles.
 */
export function slotOfTag(tag: string): number {
  let crc = 0;
  for (let i = 0; i < tag.length; i++) {
    let code = tag.charCodeAt(i);
    if (code < 0x80) {
      crc = crcByte(crc, code);
      continue;
    }
    if (code < 0x800) {
      crc = crcByte(crc, 0xc0 | (code >> 6));
    } else if (code >= 0xd800 && code <= 0xdbff && i + 1 < tag.length) {
      code = 0x10000 + ((code - 0xd800) << 10) + (tag.charCodeAt(++i) - 0xdc00);
      crc = crcByte(crc, 0xf0 | (code >> 18));
      crc = crcByte(crc, 0x80 | ((code >> 12) & 0x3f));
      crc = crcByte(crc, 0x80 | ((code >> 6) & 0x3f));
    } else {
      crc = crcByte(crc, 0xe0 | (code >> 12));
      crc = crcByte(crc, 0x80 | ((code >> 6) & 0x3f));
    }
    crc = crcByte(crc, 0x80 | (code & 0x3f));
  }
  return crc & 0x3fff;
}

/** The cluster slot of any key, by Redis' rule: the hash tag when there is a non-empty one, else the whole key. */
export function slotOfKey(key: string): number {
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) return slotOfTag(key.slice(open + 1, close));
  }
  return slotOfTag(key);
}
