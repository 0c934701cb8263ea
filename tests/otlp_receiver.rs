//! The OTLP receiver the trace tests start (`tests/support/otlp_receiver.rs`), checked on its own:
//! a request built and encoded with the OpenTelemetry project's generated types, sent twice over
//! one keep-alive connection with hand-written HTTP, comes back as the expected flattened spans;
//! a body that is not protobuf gets a 400 and a recorded error, a gzipped one a 415, another path
//! a 404.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span, status, ResourceSpans, ScopeSpans, Span, Status,
};
use prost::Message;
use support::otlp_receiver::{OtlpReceiver, ReceivedSpan};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

fn attribute(key: &str, value: Value) -> KeyValue {
    let value = Some(AnyValue { value: Some(value) });
    KeyValue {
        key: key.into(),
        value,
        ..Default::default()
    }
}

/// Sends one request on `connection` and reads its answer: (status line, headers, body).
async fn exchange(
    connection: &mut BufReader<TcpStream>,
    head: &str,
    body: &[u8],
) -> (String, BTreeMap<String, String>, Vec<u8>) {
    let request = [head.as_bytes(), body].concat();
    connection.get_mut().write_all(&request).await.unwrap();
    let mut status = String::new();
    connection.read_line(&mut status).await.unwrap();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        connection.read_line(&mut line).await.unwrap();
        let Some((name, value)) = line.split_once(':') else {
            break;
        };
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
    }
    let mut answer = vec![0; headers["content-length"].parse().unwrap()];
    connection.read_exact(&mut answer).await.unwrap();
    (status.trim_end().to_string(), headers, answer)
}

#[tokio::test]
async fn decodes_keep_alive_exports_and_refuses_what_is_not_one() {
    let receiver = OtlpReceiver::start().await;
    let span = Span {
        trace_id: (1..=16).collect(),
        span_id: vec![0xab; 8],
        parent_span_id: vec![0x0c; 8],
        name: "job".into(),
        kind: span::SpanKind::Consumer as i32,
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: 1_700_000_000_500_000_000,
        attributes: vec![
            attribute("queue", Value::StringValue("default".into())),
            attribute("attempt", Value::IntValue(3)),
        ],
        links: vec![span::Link {
            trace_id: vec![0xfe; 16],
            span_id: vec![0x01; 8],
            ..Default::default()
        }],
        status: Some(Status {
            message: "boom".into(),
            code: status::StatusCode::Error as i32,
        }),
        ..Default::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![attribute("service.name", Value::StringValue("t".into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans: vec![span],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let body = request.encode_to_vec();
    let address = receiver.endpoint().replace("http://", "");
    let mut connection = BufReader::new(TcpStream::connect(&address).await.unwrap());
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/x-protobuf\r\n\
         CONTENT-LENGTH: {}\r\n\r\n",
        body.len()
    );
    for _ in 0..2 {
        let (status, headers, answer) = exchange(&mut connection, &head, &body).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(headers["content-type"], "application/x-protobuf");
        assert_eq!(
            ExportTraceServiceResponse::decode(answer.as_slice()).unwrap(),
            ExportTraceServiceResponse::default()
        );
    }
    assert_eq!(receiver.connections(), 1);

    let expected = ReceivedSpan {
        trace_id: "0102030405060708090a0b0c0d0e0f10".into(),
        span_id: "abababababababab".into(),
        parent_span_id: "0c0c0c0c0c0c0c0c".into(),
        name: "job".into(),
        kind: "consumer".into(),
        start_unix_nano: 1_700_000_000_000_000_000,
        end_unix_nano: 1_700_000_000_500_000_000,
        attributes: [("attempt", "3"), ("queue", "default")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        status: "error".into(),
        status_message: "boom".into(),
        links: vec![("fe".repeat(16), "01".repeat(8))],
    };
    let spans = receiver
        .wait_for(Duration::from_secs(5), |s| s.len() == 2)
        .await;
    assert_eq!(spans, vec![expected.clone(), expected]);
    let service = BTreeMap::from([("service.name".to_string(), "t".to_string())]);
    assert_eq!(receiver.resources(), vec![service.clone(), service]);

    let mut other = BufReader::new(TcpStream::connect(&address).await.unwrap());
    let garbage = b"\xff\xff\xff\xff not protobuf";
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        garbage.len()
    );
    let (status, _, _) = exchange(&mut other, &head, garbage).await;
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    assert_eq!(receiver.errors().len(), 1, "{:?}", receiver.errors());
    let head = format!(
        "POST /v1/traces HTTP/1.1\r\nContent-Encoding: GZIP\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (status, _, _) = exchange(&mut other, &head, &body).await;
    assert_eq!(status, "HTTP/1.1 415 Unsupported Media Type");
    let (status, _, _) = exchange(&mut other, "GET /other HTTP/1.1\r\n\r\n", b"").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert_eq!((receiver.connections(), receiver.spans().len()), (2, 2));
}
