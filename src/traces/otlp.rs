//! OTLP's `ExportTraceServiceRequest` in protobuf, written by hand: the handful of messages the
//! master sends (resource, scope, span, link, status, attribute) need a few dozen lines of the
//! wire format, not a code generator and its runtime in every master. The receiver in the tests
//! decodes with the OpenTelemetry project's generated types, so this encoder is checked against
//! theirs (`tests/traces.rs`, `tests/otlp_receiver.rs`).
//!
//! Field numbers: opentelemetry-proto's `collector/trace/v1/trace_service.proto`,
//! `trace/v1/trace.proto`, `resource/v1/resource.proto`, `common/v1/common.proto`.

use super::span::{Kind, Span, Value};

/// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// One request carrying `spans`, under a resource with `resource` attributes and the scope
/// `drover` at `version`.
pub fn export_request(resource: &[(&str, &str)], version: &str, spans: &[Span]) -> Vec<u8> {
    let mut resource_msg = Vec::new();
    for (key, value) in resource {
        message(
            &mut resource_msg,
            1,
            &key_value(key, &Value::Str(value.to_string())),
        );
    }
    let mut scope = Vec::new();
    string(&mut scope, 1, "drover");
    string(&mut scope, 2, version);
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for span in spans {
        message(&mut scope_spans, 2, &span_message(span));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource_msg);
    message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn span_message(span: &Span) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    bytes(&mut out, 1, &span.trace.0);
    bytes(&mut out, 2, &span.id.0);
    if let Some(parent) = span.parent {
        bytes(&mut out, 4, &parent.0);
    }
    string(&mut out, 5, &span.name);
    let kind = match span.kind {
        Kind::Client => 3,
        Kind::Producer => 4,
        Kind::Consumer => 5,
    };
    tag(&mut out, 6, VARINT);
    varint(&mut out, kind);
    tag(&mut out, 7, FIXED64);
    out.extend_from_slice(&span.start.to_le_bytes());
    tag(&mut out, 8, FIXED64);
    out.extend_from_slice(&span.end.to_le_bytes());
    for (key, value) in &span.attributes {
        message(&mut out, 9, &key_value(key, value));
    }
    for (trace, id) in &span.links {
        let mut link = Vec::new();
        bytes(&mut link, 1, &trace.0);
        bytes(&mut link, 2, &id.0);
        message(&mut out, 13, &link);
    }
    if let Some(error) = &span.error {
        let mut status = Vec::new();
        string(&mut status, 2, error);
        tag(&mut status, 3, VARINT);
        varint(&mut status, 2);
        message(&mut out, 15, &status);
    }
    out
}

fn key_value(key: &str, value: &Value) -> Vec<u8> {
    let mut any = Vec::new();
    match value {
        Value::Str(s) => string(&mut any, 1, s),
        Value::Int(i) => {
            tag(&mut any, 3, VARINT);
            varint(&mut any, *i as u64);
        }
    }
    let mut out = Vec::new();
    string(&mut out, 1, key);
    message(&mut out, 2, &any);
    out
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(out, field, LEN);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    bytes(out, field, body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_take_seven_bits_a_byte_and_negatives_ten_bytes() {
        let enc = |v: u64| {
            let mut out = Vec::new();
            varint(&mut out, v);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(1), [1]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(-1i64 as u64).len(), 10);
    }
}
