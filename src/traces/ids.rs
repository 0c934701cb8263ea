//! Trace and span ids: the W3C `traceparent` a payload carries, new ids for the master's spans,
//! and the `send` span's id, derived from the job so every attempt on every master names the
//! same parent.

use std::fmt;

/// A trace's id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span's id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

/// What a W3C `traceparent` says: the dispatching span's trace and id, and whether it was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    pub trace: TraceId,
    pub span: SpanId,
    /// The `sampled` flag (bit 0 of the trace flags).
    pub sampled: bool,
}

impl Parent {
    /// `00-<32 hex>-<16 hex>-<2 hex>`, lowercase, as W3C Trace Context level 1 writes it; `None`
    /// for anything else (another version, upper case, an all-zero id, a wrong length).
    pub fn from_traceparent(text: &str) -> Option<Parent> {
        let mut parts = text.split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || version != "00" {
            return None;
        }
        let trace = TraceId(hex_bytes(trace)?);
        let span = SpanId(hex_bytes(span)?);
        let [flags] = hex_bytes::<1>(flags)?;
        if trace.0 == [0; 16] || span.0 == [0; 8] {
            return None;
        }
        Some(Parent {
            trace,
            span,
            sampled: flags & 1 == 1,
        })
    }
}

/// `N` bytes from exactly `2N` lowercase hex digits.
fn hex_bytes<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks(2).enumerate() {
        out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
    }
    Some(out)
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// New ids: splitmix64 seeded once from the kernel's random source (ids must not collide; they
/// need not be secret).
#[derive(Debug)]
pub struct IdSource {
    state: u64,
}

impl IdSource {
    /// Seeded from `/dev/urandom`, or, where it cannot be read, from the time and the process.
    pub fn random() -> IdSource {
        let mut seed = [0u8; 8];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed));
        let seed = match read {
            Ok(()) => u64::from_le_bytes(seed),
            Err(_) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                (now.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32)
            }
        };
        IdSource::seeded(seed)
    }

    /// A source whose ids follow from `seed` (unit tests).
    pub fn seeded(seed: u64) -> IdSource {
        IdSource { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    pub fn span(&mut self) -> SpanId {
        loop {
            let id = self.next().to_be_bytes();
            if id != [0; 8] {
                return SpanId(id);
            }
        }
    }

    pub fn trace(&mut self) -> TraceId {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.next().to_be_bytes());
        id[8..].copy_from_slice(&self.span().0);
        TraceId(id)
    }
}

/// splitmix64's finaliser: every bit of the input moves every bit of the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The id of job `job`'s `send` span in trace `trace`: a function of both alone, so every
/// attempt's `process` span, on whichever master, names the same parent without anyone storing
/// it.
pub fn send_span(trace: TraceId, job: i64) -> SpanId {
    let half = |bytes: &[u8]| u64::from_be_bytes(bytes.try_into().expect("8 bytes"));
    let z = mix(half(&trace.0[..8]) ^ mix(half(&trace.0[8..]) ^ job as u64));
    SpanId(if z == 0 { 1 } else { z }.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_only_in_its_exact_form() {
        let p = Parent::from_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            .expect("the W3C example");
        assert_eq!(p.trace.to_string(), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(p.span.to_string(), "b7ad6b7169203331");
        assert!(p.sampled);
        for bad in [
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "",
        ] {
            assert_eq!(Parent::from_traceparent(bad), None, "{bad:?}");
        }
        let unsampled =
            Parent::from_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
        assert!(!unsampled.expect("valid").sampled);
    }

    #[test]
    fn new_ids_differ_and_the_send_span_follows_from_the_trace_and_the_job() {
        let mut ids = IdSource::seeded(7);
        let spans: std::collections::HashSet<_> = (0..1000).map(|_| ids.span()).collect();
        assert_eq!(spans.len(), 1000);
        let (a, b) = (ids.trace(), ids.trace());
        assert_ne!(a, b);
        assert_eq!(send_span(a, 42), send_span(a, 42));
        assert_ne!(send_span(a, 42), send_span(a, 43));
        assert_ne!(send_span(a, 42), send_span(b, 42));
    }
}
