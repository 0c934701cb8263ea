//! Property tests of the worker protocol's frames: whatever a worker sends, `FromWorker::parse`
//! answers without panicking, accepts exactly the well-formed frames and names what is wrong with
//! the others; whatever the master sends, `ToWorker::encode` is one line of JSON that decodes back
//! to the same frame. Bounded (256 cases a property) so it fits the test command; the long run
//! (`bench/hostile_inputs.sh`, 100,000 cases a property) sets `DROVER_PROPTEST_CASES`.

use drover_supervisor::{FromWorker, ProtocolError, ToWorker};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{json, Value};

/// 256 cases a property (or `DROVER_PROPTEST_CASES`), and no regression files written into
/// the source tree.
fn config() -> Config {
    let cases = std::env::var("DROVER_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// The frame types a worker may send.
const KNOWN: [&str; 6] = ["hello", "started", "done", "release", "fail", "return"];

/// What a field of a worker frame must hold.
#[derive(Debug, Clone, Copy)]
enum Kind {
    U32,
    U64,
    I64,
    Str,
    Bool,
}

/// The fields of each frame type: name, kind, required.
fn fields(t: &str) -> &'static [(&'static str, Kind, bool)] {
    use Kind::*;
    match t {
        "hello" => &[
            ("v", U32, true),
            ("pid", U32, true),
            ("prefetch", U32, true),
            ("max_jobs", U64, false),
        ],
        "started" | "done" | "return" => &[("job", I64, true), ("token", I64, true)],
        "release" => &[
            ("job", I64, true),
            ("token", I64, true),
            ("delay_ms", U64, true),
        ],
        "fail" => &[
            ("job", I64, true),
            ("token", I64, true),
            ("error", Str, true),
            ("logged", Bool, false),
        ],
        _ => &[],
    }
}

/// Whether a JSON value fits a field of this kind, as serde reads it.
fn fits(kind: Kind, v: &Value) -> bool {
    match kind {
        Kind::U32 => v.as_u64().is_some_and(|n| n <= u64::from(u32::MAX)),
        Kind::U64 => v.is_u64(),
        Kind::I64 => v.is_i64(),
        Kind::Str => v.is_string(),
        Kind::Bool => v.is_boolean(),
    }
}

/// Text with what breaks naive framing: newlines, quotes, backslashes, NULs, non-BMP characters.
fn tricky_string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<char>(), 0..40).prop_map(|cs| cs.into_iter().collect()),
        prop::collection::vec(
            prop::sample::select(vec![
                "\n",
                "\r\n",
                "\r",
                "\"",
                "\\",
                "\0",
                "\u{2028}",
                "\u{2029}",
                "é",
                "💥",
                "}",
                "{\"t\":\"done\"}",
                "a",
                " ",
                "\t",
            ]),
            0..20
        )
        .prop_map(|parts| parts.concat()),
    ]
}

/// Any JSON number a worker could send, the extremes weighted in.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(0),
            json!(1),
            json!(-1),
            json!(u32::MAX),
            json!(u64::from(u32::MAX) + 1),
            json!(i64::MAX),
            json!(i64::MIN),
            json!(u64::MAX),
            json!(i64::MAX as u64 + 1),
            json!(1.0),
            json!(-0.5),
            json!(1e300),
            json!(-1e300),
            json!(5e-324),
        ]),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<u32>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from), // NaN and infinities become null
    ]
}

/// Any JSON value, shallow: numbers, strings, null, booleans, small arrays and objects.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        3 => number(),
        2 => tricky_string().prop_map(Value::String),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A field's value: most of the time one of its own kind, often not.
fn field_value(kind: Kind) -> BoxedStrategy<Value> {
    let own = match kind {
        Kind::U32 => prop_oneof![any::<u32>().prop_map(Value::from), number()].boxed(),
        Kind::U64 => prop_oneof![any::<u64>().prop_map(Value::from), number()].boxed(),
        Kind::I64 => prop_oneof![any::<i64>().prop_map(Value::from), number()].boxed(),
        Kind::Str => tricky_string().prop_map(Value::String).boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
    };
    prop_oneof![8 => own, 1 => value()].boxed()
}

/// A worker frame as JSON text: the `t` of a known type (or not), each of its fields present or
/// not with a random value, maybe extra fields, in a random order.
fn frame_text() -> impl Strategy<Value = String> {
    let t = prop_oneof![
        6 => prop::sample::select(KNOWN.to_vec()).prop_map(Value::from),
        1 => prop::sample::select(vec!["explode", "Hello", "DONE", "", "hello "]).prop_map(Value::from),
        1 => value(),
    ];
    t.prop_flat_map(|t| {
        let name = t.as_str().unwrap_or("").to_string();
        let known: Vec<BoxedStrategy<Option<(String, Value)>>> = fields(&name)
            .iter()
            .map(|&(field, kind, required)| {
                let weight_absent = if required { 1 } else { 8 };
                prop_oneof![
                    weight_absent => Just(None),
                    16 => field_value(kind).prop_map(move |v| Some((field.to_string(), v))),
                ]
                .boxed()
            })
            .collect();
        let extra = prop_oneof![
            3 => Just(Vec::new()),
            1 => prop::collection::vec(
                (
                    prop::sample::select(vec!["x", "job", "T", "logged", "max_jobs", "v", "extra", "payload"]),
                    value(),
                ),
                1..3,
            ),
        ];
        (Just(t), known, extra, any::<bool>())
    })
    .prop_flat_map(|(t, known, extra, tag_first)| {
        let mut entries: Vec<(String, Value)> = known.into_iter().flatten().collect();
        for (key, v) in extra {
            if !entries.iter().any(|(k, _)| k == key) {
                entries.push((key.to_string(), v));
            }
        }
        (Just(t), Just(entries).prop_shuffle(), Just(tag_first))
    })
    .prop_map(|(t, entries, tag_first)| {
        let mut parts: Vec<String> = entries
            .iter()
            .map(|(k, v)| format!("{}:{}", json!(k), v))
            .collect();
        let tag = format!("\"t\":{t}");
        if tag_first {
            parts.insert(0, tag);
        } else {
            parts.push(tag);
        }
        format!("{{{}}}", parts.join(","))
    })
}

/// Whether this JSON text is a well-formed worker frame, judged field by field.
fn well_formed(text: &str) -> bool {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let Some(t) = map.get("t").and_then(Value::as_str) else {
        return false;
    };
    if !KNOWN.contains(&t) {
        return false;
    }
    let spec = fields(t);
    let known_keys_only = map
        .keys()
        .all(|k| k == "t" || spec.iter().any(|(f, _, _)| f == k));
    let every_field_fits = spec.iter().all(|&(f, kind, required)| match map.get(f) {
        Some(v) => fits(kind, v),
        None => !required,
    });
    known_keys_only && every_field_fits
}

/// A rejected frame names why, as one non-empty line of reasonable length.
fn check_error(err: &ProtocolError, line: &[u8]) {
    let line = String::from_utf8_lossy(line);
    assert!(
        matches!(err, ProtocolError::Malformed { .. }),
        "{line:?}: {err:?}"
    );
    let message = err.to_string();
    assert!(message.starts_with("malformed frame ("), "{message}");
    let ProtocolError::Malformed { reason, excerpt } = err else {
        unreachable!()
    };
    assert!(!reason.is_empty(), "{line:?}: empty reason");
    // The reason quotes the worker's own text (an unknown `t` or field name): it goes to the log
    // and to the failed job's reason, so it is one printable line of bounded length too.
    assert!(
        !reason.chars().any(char::is_control),
        "{line:?}: control characters in the reason {reason:?}"
    );
    assert!(
        reason.chars().count() <= 201,
        "{line:?}: reason of {} characters",
        reason.chars().count()
    );
    assert!(
        excerpt.chars().count() <= 81,
        "{line:?}: excerpt of {} characters",
        excerpt.chars().count()
    );
    assert!(
        !excerpt.chars().any(char::is_control),
        "{line:?}: control characters in the excerpt {excerpt:?}"
    );
}

/// Any valid frame, built as the worker would.
fn from_worker() -> impl Strategy<Value = FromWorker> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
            |(v, pid, prefetch, max_jobs)| FromWorker::Hello {
                v,
                pid,
                prefetch,
                max_jobs
            }
        ),
        (any::<i64>(), any::<i64>()).prop_map(|(job, token)| FromWorker::Started { job, token }),
        (any::<i64>(), any::<i64>(), any::<bool>())
            .prop_map(|(job, token, within)| FromWorker::Done { job, token, within }),
        (any::<i64>(), any::<i64>(), any::<u64>()).prop_map(|(job, token, delay_ms)| {
            FromWorker::Release {
                job,
                token,
                delay_ms,
            }
        }),
        (any::<i64>(), any::<i64>(), tricky_string(), any::<bool>()).prop_map(
            |(job, token, error, logged)| FromWorker::Fail {
                job,
                token,
                error,
                logged,
            }
        ),
        (any::<i64>(), any::<i64>()).prop_map(|(job, token)| FromWorker::Return { job, token }),
        any::<i64>().prop_map(|at| FromWorker::QueueRestart { at }),
    ]
}

/// Any frame the master may send.
fn to_worker() -> impl Strategy<Value = ToWorker> {
    let job = (
        any::<i64>(),
        any::<i64>(),
        tricky_string(),
        any::<i32>(),
        any::<Option<i32>>(),
        tricky_string(),
        prop::option::of(tricky_string()),
        any::<u64>(),
        prop::option::of(tricky_string()),
    )
        .prop_map(
            |(job, token, queue, attempts, max_attempts, payload, fail, lease_until_ms, died)| {
                ToWorker::Job {
                    job,
                    token,
                    queue,
                    attempts,
                    max_attempts,
                    payload,
                    fail,
                    lease_until_ms,
                    died,
                }
            },
        );
    prop_oneof![
        4 => job,
        1 => any::<u64>().prop_map(|until_ms| ToWorker::Lease { until_ms }),
        1 => Just(ToWorker::Stop),
        1 => Just(ToWorker::Pause),
        1 => Just(ToWorker::Resume),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary bytes never panic the parser; whatever it accepts is a well-formed frame.
    #[test]
    fn arbitrary_bytes_are_parsed_or_refused_by_name(
        line in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            // Bytes that start like a frame, so the parser gets past the first character.
            prop::collection::vec(any::<u8>(), 0..200).prop_map(|rest| {
                let mut line = b"{\"t\":\"".to_vec();
                line.extend(rest);
                line
            }),
        ]
    ) {
        match FromWorker::parse(&line) {
            Ok(frame) => {
                let text = std::str::from_utf8(&line).expect("an accepted frame is UTF-8");
                prop_assert!(well_formed(text), "accepted {text:?} as {frame:?}");
            }
            Err(err) => check_error(&err, &line),
        }
    }

    /// Structurally valid JSON objects with random fields are accepted exactly when every field
    /// is present (but `logged`), of its type and in its range, and no other field is there.
    #[test]
    fn random_frames_are_accepted_exactly_when_well_formed(text in frame_text()) {
        let expected = well_formed(&text);
        match FromWorker::parse(text.as_bytes()) {
            Ok(frame) => {
                prop_assert!(expected, "accepted the malformed {text:?} as {frame:?}");
                // What was accepted is what was sent.
                let sent: Value = serde_json::from_str(&text).unwrap();
                let mut back = serde_json::to_value(&frame).unwrap();
                // Optional fields left out read as their defaults.
                if let (FromWorker::Fail { logged: false, .. }, None) = (&frame, sent.get("logged")) {
                    back.as_object_mut().unwrap().remove("logged");
                }
                if let (FromWorker::Hello { max_jobs: 0, .. }, None) = (&frame, sent.get("max_jobs")) {
                    back.as_object_mut().unwrap().remove("max_jobs");
                }
                prop_assert_eq!(back, sent);
            }
            Err(err) => {
                prop_assert!(!expected, "refused the well-formed {text:?}: {err}");
                check_error(&err, text.as_bytes());
            }
        }
    }

    /// A frame that quotes a long name (its type or an unknown field) is refused with a bounded,
    /// printable reason.
    #[test]
    fn long_names_give_a_bounded_reason(
        name in prop::collection::vec(any::<char>(), 100..3000).prop_map(String::from_iter),
        as_type in any::<bool>(),
    ) {
        let text = if as_type {
            json!({ "t": name }).to_string()
        } else {
            let mut frame = json!({ "t": "done", "job": 1, "token": 2 });
            frame.as_object_mut().unwrap().insert(name, json!(3));
            frame.to_string()
        };
        let err = FromWorker::parse(text.as_bytes()).unwrap_err();
        check_error(&err, text.as_bytes());
    }

    /// Every frame a worker can build is accepted as itself.
    #[test]
    fn every_valid_frame_round_trips(frame in from_worker()) {
        let line = serde_json::to_vec(&frame).unwrap();
        prop_assert_eq!(FromWorker::parse(&line).unwrap(), frame);
    }

    /// The master's frames are one line each, ending in its newline, and decode back to the same.
    #[test]
    fn master_frames_are_one_line_and_decode_back(frame in to_worker()) {
        let bytes = frame.encode();
        prop_assert_eq!(bytes.last(), Some(&b'\n'));
        prop_assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
        let line = &bytes[..bytes.len() - 1];
        prop_assert!(!line.contains(&b'\r'));
        let back: ToWorker = serde_json::from_slice(line).unwrap();
        prop_assert_eq!(back, frame);
    }
}
