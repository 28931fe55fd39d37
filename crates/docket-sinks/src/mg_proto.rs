//! progressor's Kafka encoding (`prg_notifier`): each message a Thrift strict-binary struct of
//! `valitydev/machinegun-proto` — an event a `SinkEvent` (`event_sink.thrift`), a lifecycle
//! change a `LifecycleEvent` (`lifecycle_sink.thrift`) — so a consumer that decodes
//! progressor's topics reads docket's with the same code.
//!
//! Made from docket's JSON message ([`docket_core::sink::message`]):
//!
//! - `SinkEvent.event` (field 1) = `MachineEvent {1: source_ns, 2: source_id, 3: event_id,
//!   4: created_at, 5: format_version (optional: the event metadata's `format_version`), 6:
//!   data}`; `created_at` is the event's timestamp in whole seconds, `YYYY-MM-DDTHH:MM:SSZ`, as
//!   progressor's `calendar:system_time_to_rfc3339(Sec, [{unit, second}, {offset, "Z"}])`.
//! - `data` is an `mg_msgpack.Value` union: a payload `{"$bin": "<base64>"}` (a binary from an
//!   Erlang processor: `term_to_binary` of an `mg_msgpack` term, as progressor stores it) is
//!   turned from the external term format into the value progressor's `binary_to_term` gives;
//!   any other JSON maps as null → `nl`, boolean → `b`, integer → `i`, float → `flt`,
//!   string → `str`, array → `arr`, object → `obj` with `str` keys.
//! - `LifecycleEvent {1: machine_ns, 2: machine_id, 3: created_at (the commit, in seconds), 4:
//!   data}`, `data` = `LifecycleEventData.machine` (1) = `MachineLifecycleEvent`: `created` (1,
//!   empty), `status_changed` (2) `{1: new_status}` with `MachineStatus.working` (1, after a
//!   repair) or `failed` (2) `{1: reason}`, `removed` (3, empty).
//!
//! An `obj` is written in the order of its keys' bytes, the order an Erlang map of up to 32 keys
//! iterates in; a bigger Erlang map iterates in hash order, which this does not reproduce (the
//! decoded value is the same).

use base64::Engine as _;
use serde_json::Value;
use thrift::protocol::{
    TBinaryOutputProtocol, TFieldIdentifier, TListIdentifier, TMapIdentifier, TOutputProtocol,
    TStructIdentifier, TType,
};

type Proto<'a> = TBinaryOutputProtocol<&'a mut Vec<u8>>;

/// The Thrift bytes of a docket message body (its JSON).
///
/// # Errors
/// A body that is not a process event or lifecycle change (task events have no progressor
/// shape), a `$bin` payload that is not base64 of an `mg_msgpack` term, a timestamp that is not
/// RFC 3339.
pub fn encode(body: &Value) -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    let mut out = TBinaryOutputProtocol::new(&mut buf, true);
    let text = |k: &str| {
        body[k]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("the message has no {k}"))
    };
    let w = &mut out;
    match body["kind"].as_str() {
        Some("event") => {
            let metadata_version = body["metadata"]["format_version"].as_i64();
            begin(w, "SinkEvent")?;
            field(w, 1, TType::Struct)?;
            begin(w, "MachineEvent")?;
            string(w, 1, &text("namespace")?)?;
            string(w, 2, &text("process_id")?)?;
            field(w, 3, TType::I64)?;
            w.write_i64(
                body["event_id"]
                    .as_i64()
                    .ok_or("the message has no event_id")?,
            )
            .map_err(err)?;
            string(w, 4, &seconds(&text("timestamp")?)?)?;
            if let Some(v) = metadata_version {
                field(w, 5, TType::I32)?;
                let v =
                    i32::try_from(v).map_err(|_| format!("format_version {v} is not an i32"))?;
                w.write_i32(v).map_err(err)?;
            }
            field(w, 6, TType::Struct)?;
            msgpack(w, &payload(&body["payload"])?)?;
            end(w)?;
            end(w)?;
        }
        Some(kind @ ("created" | "repaired" | "removed" | "failed")) => {
            begin(w, "LifecycleEvent")?;
            string(w, 1, &text("namespace")?)?;
            string(w, 2, &text("process_id")?)?;
            string(w, 3, &seconds(&text("created_at")?)?)?;
            field(w, 4, TType::Struct)?;
            begin(w, "LifecycleEventData")?;
            field(w, 1, TType::Struct)?;
            begin(w, "MachineLifecycleEvent")?;
            match kind {
                "created" => empty(w, 1)?,
                "removed" => empty(w, 3)?,
                _ => {
                    field(w, 2, TType::Struct)?;
                    begin(w, "MachineLifecycleStatusChangedEvent")?;
                    field(w, 1, TType::Struct)?;
                    begin(w, "MachineStatus")?;
                    if kind == "repaired" {
                        empty(w, 1)?;
                    } else {
                        field(w, 2, TType::Struct)?;
                        begin(w, "MachineStatusFailed")?;
                        if let Some(r) = body["reason"].as_str() {
                            string(w, 1, r)?;
                        }
                        end(w)?;
                    }
                    end(w)?;
                    end(w)?;
                }
            }
            end(w)?;
            end(w)?;
            end(w)?;
        }
        other => {
            return Err(format!(
                "no progressor encoding for a message of kind {other:?}"
            ))
        }
    }
    Ok(buf)
}

/// An `mg_msgpack.Value`.
#[derive(Debug, Clone, PartialEq)]
pub enum Msgpack {
    /// `nl`
    Nil,
    /// `b`
    Bool(bool),
    /// `i`
    Int(i64),
    /// `flt`
    Float(f64),
    /// `str`
    Str(String),
    /// `bin`
    Bin(Vec<u8>),
    /// `obj`
    Obj(Vec<(Msgpack, Msgpack)>),
    /// `arr`
    Arr(Vec<Msgpack>),
}

/// The value of an event payload: a `{"$bin": "<base64>"}` through the external term format,
/// other JSON as it is.
///
/// # Errors
/// A `$bin` that is not base64, not a term, or a term that is not an `mg_msgpack` value.
pub fn payload(v: &Value) -> Result<Msgpack, String> {
    if let Some(b64) = v
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get("$bin"))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().ok_or("$bin is not a string")?)
            .map_err(|e| format!("$bin is not base64: {e}"))?;
        let term = eetf::Term::decode(bytes.as_slice())
            .map_err(|e| format!("$bin is not an Erlang term: {e}"))?;
        return from_term(&term);
    }
    Ok(from_json(v))
}

fn from_json(v: &Value) -> Msgpack {
    match v {
        Value::Null => Msgpack::Nil,
        Value::Bool(b) => Msgpack::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map(Msgpack::Int)
            .unwrap_or_else(|| Msgpack::Float(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => Msgpack::Str(s.clone()),
        Value::Array(a) => Msgpack::Arr(a.iter().map(from_json).collect()),
        Value::Object(o) => Msgpack::Obj(
            o.iter()
                .map(|(k, v)| (Msgpack::Str(k.clone()), from_json(v)))
                .collect(),
        ),
    }
}

/// The value progressor's `binary_to_term` gives: `{nl, {mg_msgpack_Nil}}`, `{b, true}`,
/// `{i, 1}`, `{flt, 1.5}`, `{str, <<…>>}`, `{bin, <<…>>}`, `{obj, #{K => V}}`, `{arr, [V]}`.
fn from_term(t: &eetf::Term) -> Result<Msgpack, String> {
    use eetf::Term;
    let bad = || format!("{t} is not an mg_msgpack value");
    let Term::Tuple(tuple) = t else {
        return Err(bad());
    };
    let [Term::Atom(tag), v] = tuple.elements.as_slice() else {
        return Err(bad());
    };
    Ok(match (tag.name.as_str(), v) {
        ("nl", _) => Msgpack::Nil,
        ("b", Term::Atom(a)) if a.name == "true" || a.name == "false" => {
            Msgpack::Bool(a.name == "true")
        }
        ("i", Term::FixInteger(i)) => Msgpack::Int(i64::from(i.value)),
        ("i", Term::BigInteger(i)) => Msgpack::Int(
            i64::try_from(&i.value).map_err(|_| format!("{t}: the integer is not an i64"))?,
        ),
        ("flt", Term::Float(f)) => Msgpack::Float(f.value),
        ("str", Term::Binary(b)) => Msgpack::Str(
            String::from_utf8(b.bytes.clone()).map_err(|_| format!("{t}: str is not UTF-8"))?,
        ),
        ("bin", Term::Binary(b)) => Msgpack::Bin(b.bytes.clone()),
        ("obj", Term::Map(m)) => Msgpack::Obj(
            m.map
                .iter()
                .map(|(k, v)| Ok((from_term(k)?, from_term(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        ("arr", Term::List(l)) => {
            Msgpack::Arr(l.elements.iter().map(from_term).collect::<Result<_, _>>()?)
        }
        ("arr", Term::ByteList(l)) => Msgpack::Arr(
            l.bytes
                .iter()
                .map(|b| Msgpack::Int(i64::from(*b)))
                .collect(),
        ),
        _ => return Err(bad()),
    })
}

fn msgpack(w: &mut Proto<'_>, v: &Msgpack) -> Result<(), String> {
    begin(w, "Value")?;
    match v {
        Msgpack::Nil => empty(w, 1)?,
        Msgpack::Bool(b) => {
            field(w, 2, TType::Bool)?;
            w.write_bool(*b).map_err(err)?;
        }
        Msgpack::Int(i) => {
            field(w, 3, TType::I64)?;
            w.write_i64(*i).map_err(err)?;
        }
        Msgpack::Float(f) => {
            field(w, 4, TType::Double)?;
            w.write_double(*f).map_err(err)?;
        }
        Msgpack::Str(s) => string(w, 5, s)?,
        Msgpack::Bin(b) => {
            field(w, 6, TType::String)?;
            w.write_bytes(b).map_err(err)?;
        }
        Msgpack::Obj(entries) => {
            field(w, 7, TType::Map)?;
            let mut sorted: Vec<(Vec<u8>, &Msgpack, &Msgpack)> = entries
                .iter()
                .map(|(k, v)| Ok((sort_key(k)?, k, v)))
                .collect::<Result<_, String>>()?;
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let size = i32::try_from(sorted.len()).map_err(|_| "a map too big".to_string())?;
            w.write_map_begin(&TMapIdentifier::new(TType::Struct, TType::Struct, size))
                .map_err(err)?;
            for (_, k, v) in sorted {
                msgpack(w, k)?;
                msgpack(w, v)?;
            }
            w.write_map_end().map_err(err)?;
        }
        Msgpack::Arr(items) => {
            field(w, 8, TType::List)?;
            let size = i32::try_from(items.len()).map_err(|_| "a list too big".to_string())?;
            w.write_list_begin(&TListIdentifier::new(TType::Struct, size))
                .map_err(err)?;
            for i in items {
                msgpack(w, i)?;
            }
            w.write_list_end().map_err(err)?;
        }
    }
    end(w)
}

/// The order an Erlang map of `{str, B}` keys iterates in is B's bytes; other keys go by their
/// Thrift bytes (their variant first), which keeps the encoding deterministic.
fn sort_key(k: &Msgpack) -> Result<Vec<u8>, String> {
    if let Msgpack::Str(s) = k {
        return Ok(s.as_bytes().to_vec());
    }
    let mut buf = Vec::new();
    msgpack(&mut TBinaryOutputProtocol::new(&mut buf, true), k)?;
    Ok(buf)
}

/// RFC 3339 → whole seconds, UTC, `Z`.
fn seconds(rfc3339: &str) -> Result<String, String> {
    let t = chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map_err(|e| format!("time {rfc3339:?}: {e}"))?;
    Ok(t.with_timezone(&chrono::Utc)
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string())
}

fn err(e: thrift::Error) -> String {
    format!("thrift: {e}")
}

fn begin(w: &mut Proto<'_>, name: &str) -> Result<(), String> {
    w.write_struct_begin(&TStructIdentifier::new(name))
        .map_err(err)
}

fn end(w: &mut Proto<'_>) -> Result<(), String> {
    w.write_field_stop().map_err(err)?;
    w.write_struct_end().map_err(err)
}

fn field(w: &mut Proto<'_>, id: i16, t: TType) -> Result<(), String> {
    w.write_field_begin(&TFieldIdentifier::new::<Option<String>, String, i16>(
        None, t, id,
    ))
    .map_err(err)
}

fn string(w: &mut Proto<'_>, id: i16, s: &str) -> Result<(), String> {
    field(w, id, TType::String)?;
    w.write_string(s).map_err(err)
}

/// A field holding an empty struct (`Nil`, `MachineStatusWorking`, `…CreatedEvent`, …).
fn empty(w: &mut Proto<'_>, id: i16) -> Result<(), String> {
    field(w, id, TType::Struct)?;
    begin(w, "")?;
    end(w)
}
