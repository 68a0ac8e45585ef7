//! Streaming redaction of secret values: the host injects an operator's
//! secret into requests to its host, and a server that echoes request
//! headers back (a debugging endpoint, an error page) would hand it to the
//! guest. The response headers and body pass through a [`Redactor`] that
//! replaces every exact occurrence of a secret with [`REDACTED`], across
//! chunk boundaries.
//!
//! This defends the exact value only: a server that returns the secret
//! transformed (base64, JSON-escaped, reversed) is not caught; see
//! THREAT_MODEL.md.

/// What a secret is replaced with.
pub const REDACTED: &[u8] = b"[redacted]";

/// Replaces secret byte strings in a stream of chunks.
#[derive(Clone, Default)]
pub struct Redactor {
    needles: Vec<Vec<u8>>,
    pending: Vec<u8>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.needles.len())
    }
}

impl Redactor {
    /// A redactor for `secrets` (empty ones are ignored). Longer secrets are
    /// matched first where two start at the same byte.
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a [u8]>) -> Redactor {
        let mut needles: Vec<Vec<u8>> = secrets
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
        needles.dedup();
        Redactor {
            needles,
            pending: Vec::new(),
        }
    }

    /// True when there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// Feed a chunk; returns the bytes that can be emitted now. Bytes that
    /// may be the start of a secret are held back until the next chunk or
    /// [`Redactor::finish`].
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.needles.is_empty() {
            return chunk.to_vec();
        }
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(self.pending.len());
        let mut i = 0;
        'scan: while i < self.pending.len() {
            let rest = &self.pending[i..];
            for n in &self.needles {
                if rest.starts_with(n) {
                    out.extend_from_slice(REDACTED);
                    i += n.len();
                    continue 'scan;
                }
            }
            if self
                .needles
                .iter()
                .any(|n| n.len() > rest.len() && n.starts_with(rest))
            {
                break;
            }
            out.push(self.pending[i]);
            i += 1;
        }
        self.pending.drain(..i);
        out
    }

    /// End of stream: the held-back bytes (they cannot complete a secret).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// Redact a complete value.
    pub fn redact_all(&self, value: &[u8]) -> Vec<u8> {
        let mut r = Redactor {
            needles: self.needles.clone(),
            pending: Vec::new(),
        };
        let mut out = r.push(value);
        out.extend(r.finish());
        out
    }

    /// Whether `value` contains any secret.
    pub fn contains_secret(&self, value: &[u8]) -> bool {
        self.needles
            .iter()
            .any(|n| value.windows(n.len()).any(|w| w == n.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(r: &mut Redactor, chunks: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in chunks {
            out.extend(r.push(c));
        }
        out.extend(r.finish());
        out
    }

    #[test]
    fn replaces_across_chunk_boundaries() {
        let mut r = Redactor::new([b"s3cr3t".as_slice()]);
        assert_eq!(
            run(&mut r, &[b"a s3c", b"r3", b"t b s3cr3t", b"s3"]),
            b"a [redacted] b [redacted]s3"
        );
        assert_eq!(r.redact_all(b"xs3cr3ts3cr3t"), b"x[redacted][redacted]");
        assert!(r.contains_secret(b"..s3cr3t.."));
        assert!(!r.contains_secret(b"s3cr3"));
    }

    #[test]
    fn no_secrets_is_identity() {
        let mut r = Redactor::new([b"".as_slice()]);
        assert!(r.is_empty());
        assert_eq!(run(&mut r, &[b"abc", b"def"]), b"abcdef");
    }

    proptest::proptest! {
        /// However the stream is cut, the output never contains the secret
        /// and equals redacting the whole text at once.
        #[test]
        fn chunking_does_not_matter(text in "[ab]{0,40}", cuts in proptest::collection::vec(0usize..40, 0..6)) {
            let secret = b"abba".as_slice();
            let mut r = Redactor::new([secret, b"bab".as_slice()]);
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().filter(|c| *c <= bytes.len()).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points { chunks.push(&bytes[last..p]); last = p; }
            chunks.push(&bytes[last..]);
            let streamed = run(&mut r, &chunks);
            proptest::prop_assert_eq!(&streamed, &r.redact_all(bytes));
            let plain: Vec<u8> = streamed.to_vec();
            let stripped = String::from_utf8(plain).unwrap().replace("[redacted]", "|");
            proptest::prop_assert!(!stripped.contains("abba") && !stripped.contains("bab"));
        }
    }
}
