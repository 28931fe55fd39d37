//! The OpenAPI document's bounds, held to the server, on PostgreSQL, SQLite and MySQL/MariaDB
//! (issue 37 item 3: the server took `restarts: 2147483648` where the document says `int32`).
//!
//! The test walks the generated document (`docket_server::openapi::document`). For every
//! operation it takes valid requests (its *bases*, made by [`base`] with fresh resources, made
//! again after any probe that was not refused), and for every bound the document states on a path or query parameter or
//! anywhere in the body — `minimum`/`maximum`, the integer formats `int32`/`int64`,
//! `minLength`/`maxLength`, `pattern`, `enum`, `minItems`/`maxItems`, `uniqueItems`, `required`,
//! `additionalProperties: false`, a required body — it sends a base with that one value just
//! past the bound and expects it refused as invalid in the API's error shape (400, 422
//! `invalid_task` for a task of the body, or 404 for a path segment that names nothing); and,
//! where the base sets the field, the value at the bound, expecting it not refused as invalid
//! (no 400, 422 `invalid_task`, 413 or 5xx; ids in paths, enum members and `maxItems` above
//! 1,000 only past the bound). The document drives it: a bound added later is probed without
//! a change here, and a bound no base request reaches (a new operation, a nested object the
//! bases leave out) fails the test naming what to add to [`base`].

use docket_core::SystemClock;
use docket_engine::{Engine, EngineConfig};
use docket_server::AppState;
use docket_store::{connect, ConnectOptions, Store};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

struct Node {
    base: String,
    http: reqwest::Client,
    processor: String,
    stop: CancellationToken,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A node `n1` serving HTTP, a second node `n2` on the same database (drained and resumed by
/// the probes, so claims on `n1` go on), and a processor for the namespaces' processes.
async fn start(store: Arc<dyn Store>, dir: Option<tempfile::TempDir>) -> Node {
    store.migrate().await.unwrap();
    let stop = CancellationToken::new();
    let mut engines = Vec::new();
    for name in ["n1", "n2"] {
        let mut cfg = EngineConfig::new(name, store.backend());
        cfg.poll_interval = Duration::from_millis(200);
        let engine = Engine::new(store.clone(), Arc::new(SystemClock), cfg);
        engine.start(stop.clone()).await.unwrap();
        engines.push(engine);
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let engine = engines.remove(0);
    tokio::spawn(docket_server::serve(l, AppState::new(engine, stop.clone())));
    Node {
        base,
        http: reqwest::Client::new(),
        processor: processor().await,
        stop,
        _dir: dir,
    }
}

/// A processor that answers every step with `{"response": "ok"}`, or `{"error": …}` when the
/// step's args hold `error`.
async fn processor() -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/",
        post(|axum::Json(r): axum::Json<Value>| async move {
            axum::Json(match r["args"].get("error") {
                Some(e) => json!({"error": e}),
                None => json!({"response": "ok"}),
            })
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    url
}

async fn pg() -> Node {
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let store = connect(&ConnectOptions {
        url,
        schema: Some(format!("t_{}", uuid::Uuid::new_v4().simple())),
        max_connections: Some(8),
        strict_commit: false,
    })
    .await
    .expect("PostgreSQL is running (scripts/test.sh starts it)");
    start(store, None).await
}

async fn mysql() -> Node {
    let t = docket_store::testing::TestStore::mysql().await;
    start(t.store.clone(), None).await
}

async fn sqlite() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    start(store, Some(dir)).await
}

/// A request: its path and query parameters by name, and its body.
#[derive(Clone, Debug, Default)]
struct Req {
    params: BTreeMap<String, Value>,
    body: Option<Value>,
}

impl Req {
    fn body(body: Value) -> Req {
        Req {
            body: Some(body),
            ..Req::default()
        }
    }

    fn param(mut self, name: &str, v: impl Into<Value>) -> Req {
        self.params.insert(name.into(), v.into());
        self
    }
}

/// One step into a JSON body.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Idx(usize),
}

/// A value to send: JSON, or JSON text no `serde_json::Value` holds (an integer past 64 bits).
#[derive(Clone, Debug)]
enum Val {
    Json(Value),
    Raw(String),
}

impl Val {
    fn text(&self) -> String {
        match self {
            Val::Json(Value::String(s)) => s.clone(),
            Val::Json(v) => v.to_string(),
            Val::Raw(s) => s.clone(),
        }
    }

    /// What goes into a body: the JSON, or a marker [`send`] replaces with the raw text.
    fn json(&self) -> Value {
        match self {
            Val::Json(v) => v.clone(),
            Val::Raw(s) => Value::String(format!("@@raw@@{s}@@")),
        }
    }
}

/// Where a bound applies.
#[derive(Clone, Debug)]
enum Loc {
    Param(String),
    Body(Vec<Seg>),
}

impl Loc {
    fn push(&self, s: Seg) -> Loc {
        match self {
            Loc::Param(_) => panic!("parameters are scalars"),
            Loc::Body(p) => {
                let mut p = p.clone();
                p.push(s);
                Loc::Body(p)
            }
        }
    }

    fn show(&self) -> String {
        match self {
            Loc::Param(n) => format!("parameter {n}"),
            Loc::Body(p) => {
                let mut s = String::from("body");
                for seg in p {
                    match seg {
                        Seg::Key(k) => s.push_str(&format!(".{k}")),
                        Seg::Idx(i) => s.push_str(&format!("[{i}]")),
                    }
                }
                s
            }
        }
    }
}

/// What a probe changes in its base request.
#[derive(Clone, Debug)]
enum Change {
    Set(Loc, Val),
    /// Remove a body member or a parameter.
    Remove(Loc),
    /// Resize a body array, repeating its first element (`true`: made distinct, for
    /// `uniqueItems`: a text element gets `-1`, `-2`… appended).
    Len(Loc, usize, bool),
    NoBody,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Refused,
    Accepted,
}

#[derive(Clone, Debug)]
struct Probe {
    base: usize,
    what: String,
    change: Change,
    expect: Expect,
}

fn get_mut<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    let mut cur = v;
    for s in path {
        cur = match s {
            Seg::Key(k) => cur.as_object_mut()?.get_mut(k)?,
            Seg::Idx(i) => cur.as_array_mut()?.get_mut(*i)?,
        };
    }
    Some(cur)
}

fn apply(req: &mut Req, change: &Change) {
    let body_path = |l: &Loc| match l {
        Loc::Body(p) => p.clone(),
        Loc::Param(_) => unreachable!(),
    };
    match change {
        Change::Set(Loc::Param(n), v) => {
            req.params.insert(n.clone(), v.json());
        }
        Change::Remove(Loc::Param(n)) => {
            req.params.remove(n);
        }
        Change::Set(l, v) => {
            let p = body_path(l);
            let (last, parent) = p.split_last().unwrap();
            let parent = get_mut(req.body.as_mut().unwrap(), parent).unwrap();
            match last {
                Seg::Key(k) => {
                    parent.as_object_mut().unwrap().insert(k.clone(), v.json());
                }
                Seg::Idx(i) => parent[*i] = v.json(),
            }
        }
        Change::Remove(l) => {
            let p = body_path(l);
            let (Seg::Key(k), parent) = p.split_last().unwrap() else {
                unreachable!()
            };
            let parent = get_mut(req.body.as_mut().unwrap(), parent).unwrap();
            parent.as_object_mut().unwrap().remove(k);
        }
        Change::Len(l, n, distinct) => {
            let a = get_mut(req.body.as_mut().unwrap(), &body_path(l)).unwrap();
            let first = a[0].clone();
            *a = Value::Array(
                (0..*n)
                    .map(|i| match (&first, *distinct && i > 0) {
                        (Value::String(s), true) => json!(format!("{s}-{i}")),
                        _ => first.clone(),
                    })
                    .collect(),
            );
        }
        Change::NoBody => req.body = None,
    }
}

/// An operation of the document.
struct Op {
    method: String,
    path: String,
    /// `(name, in, schema pointer)`.
    params: Vec<(String, String, String)>,
    body: Option<(String, bool)>,
}

impl Op {
    fn label(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

fn ops(doc: &Value) -> Vec<Op> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "put", "post", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let esc = path.replace('~', "~0").replace('/', "~1");
            let at = format!("/paths/{esc}/{method}");
            let params = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .enumerate()
                        .filter(|(_, p)| p["in"] == "path" || p["in"] == "query")
                        .map(|(i, p)| {
                            (
                                p["name"].as_str().unwrap().to_string(),
                                p["in"].as_str().unwrap().to_string(),
                                format!("{at}/parameters/{i}/schema"),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            let body = op["requestBody"]["content"]
                .get("application/json")
                .map(|_| {
                    (
                        format!("{at}/requestBody/content/application~1json/schema"),
                        op["requestBody"]["required"] == true,
                    )
                });
            out.push(Op {
                method: method.to_uppercase(),
                path: path.clone(),
                params,
                body,
            });
        }
    }
    out
}

/// Resolves `$ref`s: the schema and its pointer.
fn resolve<'a>(doc: &'a Value, ptr: &str) -> (&'a Value, String) {
    let mut ptr = ptr.to_string();
    loop {
        let s = doc.pointer(&ptr).unwrap_or_else(|| panic!("no {ptr}"));
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => ptr = r.trim_start_matches('#').to_string(),
            None => return (s, ptr),
        }
    }
}

fn types(s: &Value) -> Vec<&str> {
    match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

/// The keywords of a node this test probes.
fn bounded(s: &Value) -> bool {
    [
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "pattern",
        "enum",
    ]
    .iter()
    .any(|k| s.get(k).is_some())
        || matches!(s["format"].as_str(), Some("int32" | "int64"))
        || s["required"].as_array().is_some_and(|r| !r.is_empty())
        || s["additionalProperties"] == false
}

/// Every bounded node reachable from `ptr`.
fn reachable(doc: &Value, ptr: &str, seen: &mut BTreeSet<String>, out: &mut BTreeSet<String>) {
    let (s, ptr) = resolve(doc, ptr);
    if !seen.insert(ptr.clone()) {
        return;
    }
    if bounded(s) {
        out.insert(ptr.clone());
    }
    for k in ["oneOf", "anyOf", "allOf"] {
        if let Some(a) = s[k].as_array() {
            for i in 0..a.len() {
                reachable(doc, &format!("{ptr}/{k}/{i}"), seen, out);
            }
        }
    }
    if let Some(p) = s["properties"].as_object() {
        for k in p.keys() {
            reachable(doc, &format!("{ptr}/properties/{k}"), seen, out);
        }
    }
    if s["items"].is_object() {
        reachable(doc, &format!("{ptr}/items"), seen, out);
    }
    if s["additionalProperties"].is_object() {
        reachable(doc, &format!("{ptr}/additionalProperties"), seen, out);
    }
}

/// Whether a value fits a schema, roughly: types, enums, required and closed properties.
fn fits(doc: &Value, ptr: &str, v: &Value) -> bool {
    let (s, ptr) = resolve(doc, ptr);
    for k in ["oneOf", "anyOf"] {
        if let Some(a) = s[k].as_array() {
            return (0..a.len()).any(|i| fits(doc, &format!("{ptr}/{k}/{i}"), v));
        }
    }
    if let Some(a) = s["allOf"].as_array() {
        return (0..a.len()).all(|i| fits(doc, &format!("{ptr}/allOf/{i}"), v));
    }
    let t = types(s);
    let type_ok = t.is_empty()
        || t.iter().any(|t| match *t {
            "null" => v.is_null(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
    if !type_ok {
        return false;
    }
    if let Some(e) = s["enum"].as_array() {
        if !e.contains(v) {
            return false;
        }
    }
    if let Some(m) = v.as_object() {
        let required = s["required"].as_array().cloned().unwrap_or_default();
        if required
            .iter()
            .any(|r| !m.contains_key(r.as_str().unwrap()))
        {
            return false;
        }
        if s["additionalProperties"] == false {
            let props = s["properties"].as_object();
            if m.keys().any(|k| !props.is_some_and(|p| p.contains_key(k))) {
                return false;
            }
        }
    }
    true
}

fn int_val(n: i128) -> Val {
    if let Ok(i) = i64::try_from(n) {
        Val::Json(json!(i))
    } else if let Ok(u) = u64::try_from(n) {
        Val::Json(json!(u))
    } else {
        Val::Raw(n.to_string())
    }
}

/// The debounce schema (see [`Walker::walk`]).
const DEBOUNCE: &str = "/components/schemas/Debounce";

struct Walker<'a> {
    doc: &'a Value,
    base: usize,
    /// The operation's label (`POST /v1/tasks`).
    label: &'a str,
    /// Whether the base request sets the value being walked.
    present: bool,
    probes: Vec<Probe>,
    /// The bounded nodes probed.
    probed: BTreeSet<String>,
    /// What the base requests leave out, though bounded.
    unreached: Vec<String>,
}

impl Walker<'_> {
    fn probe(&mut self, what: String, change: Change, expect: Expect) {
        self.probes.push(Probe {
            base: self.base,
            what,
            change,
            expect,
        });
    }

    /// A probe setting `v` at `at`. A value at the bound (`Accepted`) is probed only where the
    /// base sets the field: an absent field may be absent for a rule between fields (a lease
    /// only on a running task, `attempt` within `max_attempts`) the document cannot state.
    fn set(&mut self, at: &Loc, v: Val, why: &str, expect: Expect) {
        if expect == Expect::Accepted && !self.present {
            return;
        }
        let what = format!("{} = {} ({why})", at.show(), short(&v.text()));
        self.probe(what, Change::Set(at.clone(), v), expect);
    }

    /// Whether the node at `ptr` is `schema`, or may be (a `oneOf`/`anyOf` member).
    fn leads_to(&self, ptr: &str, schema: &str) -> bool {
        let (s, p) = resolve(self.doc, ptr);
        p == schema
            || ["oneOf", "anyOf"].iter().any(|k| {
                s[*k].as_array().is_some_and(|a| {
                    (0..a.len()).any(|i| resolve(self.doc, &format!("{p}/{k}/{i}")).1 == schema)
                })
            })
    }

    /// Probes the bounds of the node at `ptr` for the value `v` (absent: `None`) at `at`.
    fn walk(&mut self, ptr: &str, v: Option<&Value>, at: &Loc) {
        self.present = v.is_some();
        let doc = self.doc;
        // A field the operation refuses whole: a valid value is refused, so there are no
        // bounds to reach below it. `debounce` (issue 43) keeps one waiting task per key of a
        // single enqueue: a batch's, a workflow's and a schedule's task refuse it, as does a
        // task among several in one `POST /v1/tasks`.
        let refuses_debounce = self.label != "POST /v1/tasks"
            || matches!(at, Loc::Body(p) if p.iter().any(|s| matches!(s, Seg::Idx(_))));
        if v.is_none() && refuses_debounce && self.leads_to(ptr, DEBOUNCE) {
            self.probe(
                format!("{} = a valid debounce (refused whole here)", at.show()),
                Change::Set(
                    at.clone(),
                    Val::Json(json!({"key": "contract", "period": "1s"})),
                ),
                Expect::Refused,
            );
            reachable(doc, DEBOUNCE, &mut BTreeSet::new(), &mut self.probed);
            return;
        }
        let (s, ptr) = resolve(doc, ptr);
        for k in ["oneOf", "anyOf"] {
            let Some(variants) = s[k].as_array() else {
                continue;
            };
            for i in 0..variants.len() {
                let vp = format!("{ptr}/{k}/{i}");
                let (vs, _) = resolve(doc, &vp);
                match v {
                    Some(x) if !x.is_null() => {
                        if fits(doc, &vp, x) {
                            self.walk(&vp, v, at);
                        }
                    }
                    _ => {
                        let t = types(vs);
                        if t == ["null"] {
                            continue;
                        }
                        if t.iter().any(|t| *t == "object" || *t == "array")
                            || vs.get("oneOf").is_some()
                            || vs.get("allOf").is_some()
                        {
                            self.unreached_below(&vp, at);
                        } else {
                            self.walk(&vp, None, at);
                        }
                    }
                }
            }
        }
        if let Some(members) = s["allOf"].as_array() {
            for i in 0..members.len() {
                self.walk(&format!("{ptr}/allOf/{i}"), v, at);
            }
        }
        self.present = v.is_some();
        let before = self.probes.len();
        // Only past the bound: which member fits often depends on other fields (a bulk
        // action and its states, a rate limit's kind and period).
        if s.get("enum").is_some() {
            self.set(
                at,
                Val::Json(json!("zz-not-listed")),
                "not in enum",
                Expect::Refused,
            );
        }
        let t = types(s);
        if t.contains(&"integer") {
            self.integer(s, at);
        } else if t.contains(&"number") {
            self.number(s, at);
        }
        if t.contains(&"string") && s.get("enum").is_none() {
            self.string(s, at);
        }
        if self.probes.len() > before {
            self.probed.insert(ptr.clone());
        }
        if t.contains(&"array") {
            match v {
                Some(Value::Array(a)) => self.array(s, &ptr, a, at),
                _ if bounded(s) || self.has_bounds_below(&format!("{ptr}/items")) => {
                    self.unreached.push(format!("{} ({ptr})", at.show()))
                }
                _ => {}
            }
        }
        if t.contains(&"object") || s.get("properties").is_some() {
            match v {
                Some(Value::Object(m)) => self.object(s, &ptr, m, at),
                _ if bounded(s) || self.has_bounds_below(&ptr) => {
                    self.unreached.push(format!("{} ({ptr})", at.show()))
                }
                _ => {}
            }
        }
    }

    fn has_bounds_below(&self, ptr: &str) -> bool {
        if self.doc.pointer(ptr).is_none() {
            return false;
        }
        let mut out = BTreeSet::new();
        reachable(self.doc, ptr, &mut BTreeSet::new(), &mut out);
        !out.is_empty()
    }

    fn unreached_below(&mut self, ptr: &str, at: &Loc) {
        if self.has_bounds_below(ptr) {
            self.unreached.push(format!("{} ({ptr})", at.show()));
        }
    }

    fn integer(&mut self, s: &Value, at: &Loc) {
        let format = match s["format"].as_str() {
            Some("int32") => Some((i128::from(i32::MIN), i128::from(i32::MAX))),
            Some("int64") => Some((i128::from(i64::MIN), i128::from(i64::MAX))),
            _ => None,
        };
        let num = |k: &str| s[k].as_f64().map(|f| f as i128);
        let mut lo = format.map(|f| f.0);
        let mut hi = format.map(|f| f.1);
        let tighter = |a: Option<i128>, b: Option<i128>, max: bool| match (a, b) {
            (Some(a), Some(b)) => Some(if max { a.max(b) } else { a.min(b) }),
            (a, b) => a.or(b),
        };
        lo = tighter(lo, num("minimum"), true);
        lo = tighter(lo, num("exclusiveMinimum").map(|m| m + 1), true);
        hi = tighter(hi, num("maximum"), false);
        hi = tighter(hi, num("exclusiveMaximum").map(|m| m - 1), false);
        if let Some(lo) = lo {
            self.set(at, int_val(lo - 1), "below the minimum", Expect::Refused);
            self.set(at, int_val(lo), "the minimum", Expect::Accepted);
        }
        if let Some(hi) = hi {
            self.set(at, int_val(hi + 1), "above the maximum", Expect::Refused);
            self.set(at, int_val(hi), "the maximum", Expect::Accepted);
        }
    }

    fn number(&mut self, s: &Value, at: &Loc) {
        if let Some(m) = s["minimum"].as_f64() {
            self.set(
                at,
                Val::Json(json!(m - 1e-6)),
                "below the minimum",
                Expect::Refused,
            );
            self.set(at, Val::Json(json!(m)), "the minimum", Expect::Accepted);
        }
        if let Some(m) = s["maximum"].as_f64() {
            self.set(
                at,
                Val::Json(json!(m + 1e-6)),
                "above the maximum",
                Expect::Refused,
            );
            self.set(at, Val::Json(json!(m)), "the maximum", Expect::Accepted);
        }
    }

    fn string(&mut self, s: &Value, at: &Loc) {
        let pattern = s["pattern"]
            .as_str()
            .map(|p| regex::Regex::new(p).unwrap_or_else(|e| panic!("pattern {p}: {e}")));
        let matches = |v: &str| pattern.as_ref().is_none_or(|r| r.is_match(v));
        let min = s["minLength"].as_u64().map(|n| n as usize);
        let max = s["maxLength"].as_u64().map(|n| n as usize);
        // A character whose repetition the pattern takes, so a length is the only fault.
        let fill = ['a', '0', 'A']
            .into_iter()
            .find(|c| matches(&c.to_string()));
        let text = |n: usize| Val::Json(Value::String(fill.unwrap_or('a').to_string().repeat(n)));
        if let Some(min) = min.filter(|m| *m > 0) {
            self.set(at, text(min - 1), "shorter than minLength", Expect::Refused);
            if matches(&text(min).text()) {
                self.set(at, text(min), "minLength", Expect::Accepted);
            }
        }
        if let Some(max) = max {
            self.set(at, text(max + 1), "longer than maxLength", Expect::Refused);
            if matches(&text(max).text()) {
                self.set(at, text(max), "maxLength", Expect::Accepted);
            }
        }
        if let Some(p) = &pattern {
            let fits_len = |v: &str| {
                let n = v.chars().count();
                min.is_none_or(|m| n >= m) && max.is_none_or(|m| n <= m)
            };
            let bad = ["zz", "a\u{1}b", "a\u{85}b", "a b", "!", "zz:\u{7f}"]
                .into_iter()
                .find(|c| !p.is_match(c) && fits_len(c))
                .unwrap_or_else(|| panic!("no probe value breaks pattern {p}: add one"));
            self.set(
                at,
                Val::Json(json!(bad)),
                "does not match the pattern",
                Expect::Refused,
            );
        }
    }

    fn array(&mut self, s: &Value, ptr: &str, a: &[Value], at: &Loc) {
        self.probed.insert(ptr.to_string());
        let distinct = s["uniqueItems"] == true;
        if let Some(min) = s["minItems"].as_u64().map(|n| n as usize) {
            if min > 0 {
                let change = if min == 1 {
                    Change::Set(at.clone(), Val::Json(json!([])))
                } else {
                    Change::Len(at.clone(), min - 1, distinct)
                };
                self.probe(
                    format!("{} with {} items (minItems {min})", at.show(), min - 1),
                    change,
                    Expect::Refused,
                );
            }
        }
        if distinct {
            if a.is_empty() {
                self.unreached
                    .push(format!("{} is empty ({ptr})", at.show()));
            } else {
                self.probe(
                    format!("{} with an item twice (uniqueItems)", at.show()),
                    Change::Len(at.clone(), 2, false),
                    Expect::Refused,
                );
            }
        }
        if let Some(max) = s["maxItems"].as_u64().map(|n| n as usize) {
            if a.is_empty() {
                self.unreached
                    .push(format!("{} is empty ({ptr})", at.show()));
            } else {
                self.probe(
                    format!("{} with {} items (maxItems {max})", at.show(), max + 1),
                    Change::Len(at.clone(), max + 1, distinct),
                    Expect::Refused,
                );
                if max <= 1000 {
                    self.probe(
                        format!("{} with {max} items (maxItems)", at.show()),
                        Change::Len(at.clone(), max, distinct),
                        Expect::Accepted,
                    );
                }
            }
        }
        if s["items"].is_object() {
            if a.is_empty() && self.has_bounds_below(&format!("{ptr}/items")) {
                self.unreached
                    .push(format!("{}[] (empty; {ptr}/items)", at.show()));
            }
            for (i, e) in a.iter().enumerate() {
                self.walk(&format!("{ptr}/items"), Some(e), &at.push(Seg::Idx(i)));
            }
        }
    }

    fn object(&mut self, s: &Value, ptr: &str, m: &serde_json::Map<String, Value>, at: &Loc) {
        self.probed.insert(ptr.to_string());
        for r in s["required"].as_array().cloned().unwrap_or_default() {
            let r = r.as_str().unwrap();
            if m.contains_key(r) {
                let l = at.push(Seg::Key(r.into()));
                self.probe(
                    format!("{} left out (required)", l.show()),
                    Change::Remove(l),
                    Expect::Refused,
                );
            }
        }
        if s["additionalProperties"] == false {
            let l = at.push(Seg::Key("zz_unknown".into()));
            self.set(
                &l,
                Val::Json(json!(1)),
                "additionalProperties: false",
                Expect::Refused,
            );
        }
        if let Some(props) = s["properties"].as_object() {
            for k in props.keys() {
                let l = at.push(Seg::Key(k.clone()));
                self.walk(&format!("{ptr}/properties/{k}"), m.get(k), &l);
            }
        }
        if s["additionalProperties"].is_object() {
            let props = s["properties"].as_object();
            for (k, v) in m {
                if !props.is_some_and(|p| p.contains_key(k)) {
                    let l = at.push(Seg::Key(k.clone()));
                    self.walk(&format!("{ptr}/additionalProperties"), Some(v), &l);
                }
            }
        }
    }
}

fn short(s: &str) -> String {
    let n = s.chars().count();
    if n > 40 {
        let head: String = s.chars().take(12).collect();
        format!("{head:?}… ({n} characters)")
    } else {
        format!("{s:?}")
    }
}

/// Percent-encodes everything but unreserved characters.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Raw JSON text of a parameter value (a marker from [`Val::json`] gives its text back).
fn param_text(v: &Value) -> String {
    match v {
        Value::String(s) => s
            .strip_prefix("@@raw@@")
            .and_then(|s| s.strip_suffix("@@"))
            .unwrap_or(s)
            .to_string(),
        v => v.to_string(),
    }
}

async fn send(n: &Node, op: &Op, req: &Req) -> (u16, Value) {
    let mut path = op.path.clone();
    let mut query = Vec::new();
    for (name, loc, _) in &op.params {
        let Some(v) = req.params.get(name) else {
            continue;
        };
        let t = enc(&param_text(v));
        if loc == "path" {
            path = path.replace(&format!("{{{name}}}"), &t);
        } else {
            query.push(format!("{}={t}", enc(name)));
        }
    }
    assert!(
        !path.contains('{'),
        "{}: a path parameter is missing",
        op.label()
    );
    let mut url = format!("{}{path}", n.base);
    if !query.is_empty() {
        url = format!("{url}?{}", query.join("&"));
    }
    let m = reqwest::Method::from_bytes(op.method.as_bytes()).unwrap();
    let mut r = n.http.request(m, url);
    if let Some(b) = &req.body {
        let mut text = b.to_string();
        while let Some(i) = text.find("\"@@raw@@") {
            let end = text[i + 8..].find("@@\"").unwrap() + i + 8;
            let raw = text[i + 8..end].to_string();
            text.replace_range(i..end + 3, &raw);
        }
        r = r.header("content-type", "application/json").body(text);
    }
    let resp = match r.timeout(Duration::from_secs(30)).send().await {
        Ok(r) => r,
        // A request the server did not answer: status 0, the error as the body.
        Err(e) => {
            return (
                0,
                json!({"error": {"code": "no_answer", "message": format!("{e:?}")}}),
            )
        }
    };
    let st = resp.status().as_u16();
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if sse {
        return (st, Value::Null);
    }
    (st, resp.json().await.unwrap_or(Value::Null))
}

fn uid() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A task with every field set (valid together) but `unique_key` (which a batch's tasks may
/// not have); `q` its queue.
fn full_task(q: &str) -> Value {
    json!({
        "queue": q, "kind": "k", "payload": {"a": 1}, "priority": 1, "run_in": "0s",
        "expires_in": "1h", "max_attempts": 3,
        "backoff": {"kind": "exponential", "initial": "1s", "max": "1h", "coefficient": 2.0, "jitter": 0.1},
        "timeout": "30s", "concurrency_key": "ck", "concurrency_limit": 2,
        "rate_limit": "rl", "partition_key": "p", "node": "n1", "user_id": "u",
        "trace_id": uid(), "stage": "s", "progress": {"p": 1}, "tags": ["t"],
        "requires": {"gpu": "a100"}, "prefer": {"labels": {"region": "eu"}, "for": "1s"}
    })
}

/// [`full_task`] with a `unique_key`.
fn unique_task(q: &str) -> Value {
    let mut t = full_task(q);
    t["unique_key"] = json!(uid());
    t
}

fn callbacks(q: &str) -> Value {
    json!({"completed": full_task(q), "succeeded": full_task(q), "discarded": full_task(q), "cancelled": full_task(q)})
}

/// A workflow task: `{"kind": "k", "ref": r}` with every task field, and dependencies.
fn wf_task(q: &str, r: &str, deps: Value) -> Value {
    let mut t = full_task(q);
    t["ref"] = json!(r);
    t["depends_on"] = deps;
    t
}

impl Node {
    async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self.http.request(m, format!("{}{path}", self.base));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let st = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(st.is_success(), "{method} {path}: {st} {v}");
        v
    }

    /// A new task of queue `q`: its id.
    async fn task(&self, q: &str, extra: Value) -> i64 {
        let mut t = json!({"queue": q, "kind": "k", "stage": "s"});
        for (k, v) in extra.as_object().unwrap() {
            t[k] = v.clone();
        }
        self.ok("POST", "/v1/tasks", Some(t)).await["id"]
            .as_i64()
            .unwrap()
    }

    /// A running task: its id and lease.
    async fn claimed(&self) -> (i64, String) {
        let q = uid();
        self.task(&q, json!({})).await;
        let v = self
            .ok(
                "POST",
                &format!("/v1/queues/{q}/claim"),
                Some(json!({"worker": "w"})),
            )
            .await;
        let t = &v["tasks"][0];
        (
            t["id"].as_i64().unwrap_or_else(|| panic!("claim: {v}")),
            t["lease"]["token"].as_str().unwrap().to_string(),
        )
    }

    async fn namespace(&self) -> String {
        let ns = uid();
        self.ok(
            "PUT",
            &format!("/v1/namespaces/{ns}"),
            Some(json!({"processor": {"url": self.processor}})),
        )
        .await;
        ns
    }

    /// A process in `status` (`running`, `error`): namespace and id.
    async fn process(&self, status: &str) -> (String, String) {
        let ns = self.namespace().await;
        let id = uid();
        self.ok(
            "PUT",
            &format!("/v1/namespaces/{ns}/processes/{id}"),
            Some(json!({"status": status})),
        )
        .await;
        (ns, id)
    }

    async fn batch(&self) -> i64 {
        self.ok("POST", "/v1/batches", Some(json!({"open": true})))
            .await["batch"]["id"]
            .as_i64()
            .unwrap()
    }

    /// A durable function's run whose task is claimed: its id and lease.
    async fn run_claimed(&self) -> (String, String) {
        let q = uid();
        let id = uid();
        self.ok(
            "POST",
            "/v1/workflow-runs",
            Some(json!({"workflow": "w", "id": id, "queue": q})),
        )
        .await;
        let v = self
            .ok(
                "POST",
                &format!("/v1/queues/{q}/claim"),
                Some(json!({"worker": "w"})),
            )
            .await;
        let lease = v["tasks"][0]["lease"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("claim: {v}"))
            .to_string();
        (id, lease)
    }

    async fn workflow(&self) -> i64 {
        let q = uid();
        self.ok(
            "POST",
            "/v1/workflows",
            Some(json!({"tasks": [{"queue": q, "kind": "k", "ref": "a", "run_in": "1h"}]})),
        )
        .await["workflow"]["batch"]["id"]
            .as_i64()
            .unwrap()
    }
}

/// Valid requests of each operation, with fresh resources each call; more than one where the
/// body has alternative shapes. Every bounded field is set somewhere, so the walk reaches it.
async fn base(n: &Node, op: &str) -> Option<Vec<Req>> {
    let q = uid();
    let name = uid();
    let now = "2030-01-01T00:00:00Z";
    Some(match op {
        "GET /v1/audit" => vec![Req::default().param("limit", 10)],
        "GET /v1/batches" => vec![Req::default().param("before", 1000).param("limit", 10)],
        "GET /v1/tasks" => vec![Req::default()
            .param("queue", q)
            .param("limit", 10)
            .param("after", 0)
            .param("order", "asc")],
        "GET /v1/events" => vec![Req::default()
            .param("namespace", n.namespace().await)
            .param("after", 0)],
        "POST /v1/batches" => vec![Req::body(json!({
            "name": "b", "open": false, "callbacks": callbacks(&q),
            "tasks": [{"queue": q, "kind": "k"}, full_task(&q)],
        }))],
        "GET /v1/batches/{id}" | "POST /v1/batches/{id}/seal" => {
            vec![Req::default().param("id", n.batch().await)]
        }
        "POST /v1/batches/{id}/tasks" => vec![Req::body(json!({
            "seal": false, "tasks": [{"queue": q, "kind": "k"}, full_task(&q)],
        }))
        .param("id", n.batch().await)],
        "GET /v1/namespaces/{ns}" => vec![Req::default().param("ns", n.namespace().await)],
        "GET /v1/namespaces/{ns}/processes" => vec![Req::default()
            .param("ns", n.namespace().await)
            .param("status", "running")
            .param("limit", 10)
            .param("after", "a")],
        "PUT /v1/namespaces/{ns}" => vec![Req::body(json!({
            "processor": {"url": n.processor}, "webhook": {"url": n.processor},
            "retry_policy": {"initial_timeout": "1s", "backoff_coefficient": 1.5, "max_timeout": "1m",
                             "max_attempts": 3, "non_retryable_errors": ["x"]},
            "worker_pool_size": 2, "process_step_timeout": "10s", "task_scan_timeout": "10s",
            "call_scan_timeout": "1s",
        }))
        .param("ns", uid())],
        "POST /v1/namespaces/{ns}/processes" => vec![Req::body(json!({
            "id": uid(), "args": {}, "context": {}, "idempotency_key": uid(),
        }))
        .param("ns", n.namespace().await)],
        "GET /v1/namespaces/{ns}/processes/{id}" => {
            let (ns, id) = n.process("running").await;
            vec![Req::default()
                .param("ns", ns)
                .param("id", id)
                .param("offset", 0)
                .param("limit", 10)
                .param("direction", "forward")]
        }
        "GET /v1/namespaces/{ns}/processes/{id}/trace" => {
            let (ns, id) = n.process("running").await;
            vec![Req::default().param("ns", ns).param("id", id)]
        }
        "PUT /v1/namespaces/{ns}/processes/{id}" => vec![Req::body(json!({
            "status": "running", "detail": "d", "aux_state": {}, "metadata": {},
            "history": [{"payload": {}, "metadata": {}, "timestamp": now}],
            "timer": {"set_timer": now, "remove": false},
        }))
        .param("ns", n.namespace().await)
        .param("id", uid())],
        "POST /v1/namespaces/{ns}/processes/{id}/call" => {
            let (ns, id) = n.process("running").await;
            vec![Req::body(json!({
                "args": {}, "context": {}, "idempotency_key": uid(),
                "range": {"offset": 0, "limit": 10, "direction": "forward"},
            }))
            .param("ns", ns)
            .param("id", id)]
        }
        "POST /v1/namespaces/{ns}/processes/{id}/repair" => {
            let (ns, id) = n.process("error").await;
            vec![Req::body(json!({
                "args": {}, "context": {}, "idempotency_key": uid(),
                "range": {"offset": 0, "limit": 10, "direction": "forward"},
            }))
            .param("ns", ns)
            .param("id", id)]
        }
        "POST /v1/namespaces/{ns}/processes/{id}/simple-repair" => {
            let (ns, id) = n.process("error").await;
            vec![Req::default().param("ns", ns).param("id", id)]
        }
        "POST /v1/nodes/{name}/drain" => {
            vec![Req::body(json!({"to": "n1"})).param("name", "n2")]
        }
        "POST /v1/nodes/{name}/resume" => vec![Req::default().param("name", "n2")],
        "GET /v1/queues/{queue}"
        | "POST /v1/queues/{queue}/pause"
        | "POST /v1/queues/{queue}/resume" => {
            n.task(&q, json!({})).await;
            vec![Req::default().param("queue", q)]
        }
        "PUT /v1/queues/{queue}" => vec![Req::body(json!({
            "paused": false, "concurrency_limit": 5, "max_attempts": 3, "timeout": "30s",
            "backoff": {"kind": "linear", "initial": "1s", "max": "1m", "coefficient": 1.0, "jitter": 0.0},
            "retention_completed": "1h", "retention_failed": "1d", "schedule_interval": "1s",
            "schedule_limit": 10, "mask_payload": false, "rate_limit": "rl", "fair": true,
            "partition_limit": 2, "partition_weights": {"p": 2},
        }))
        .param("queue", q)],
        "POST /v1/queues/{queue}/claim" => {
            n.task(&q, json!({})).await;
            let (done, lease) = n.claimed().await;
            let (failed, failed_lease) = n.claimed().await;
            vec![Req::body(json!({
                "worker": "w", "limit": 1, "kinds": ["k"], "stages": ["s"], "lease": "30s", "wait": "0s",
                "labels": {"gpu": "a100"},
                "lean": true,
                "complete": [{
                    "id": done, "lease": lease, "result": {"r": 1}, "next_stage": "s2",
                    "payload": {"p": 2}, "priority": 2, "run_in": "1s",
                }],
                "fail": [{
                    "id": failed, "lease": failed_lease, "error": "e", "retry_in": "1s",
                    "permanent": false, "worker": "w",
                }],
            }))
            .param("queue", q)]
        }
        "GET /v1/rate-limits/{name}" | "DELETE /v1/rate-limits/{name}" => {
            n.ok(
                "PUT",
                &format!("/v1/rate-limits/{name}"),
                Some(json!({"kind": "window", "limit": 5, "period": "1s"})),
            )
            .await;
            vec![Req::default().param("name", name)]
        }
        "PUT /v1/rate-limits/{name}" => {
            vec![Req::body(json!({"kind": "window", "limit": 5, "period": "1s"})).param("name", name)]
        }
        "POST /v1/schedules" => vec![Req::body(json!({
            "name": name, "every": "1h", "drift": false, "after_end": false, "start_at": now,
            "task": unique_task(&q),
        }))],
        "GET /v1/schedules/{name}"
        | "DELETE /v1/schedules/{name}"
        | "POST /v1/schedules/{name}/pause"
        | "POST /v1/schedules/{name}/resume" => {
            n.ok(
                "POST",
                "/v1/schedules",
                Some(json!({"name": name, "every": "1h", "task": {"queue": q, "kind": "k"}})),
            )
            .await;
            vec![Req::default().param("name", name)]
        }
        "POST /v1/tasks" => vec![
            Req::body(unique_task(&q)),
            Req::body(json!({"tasks": [{"queue": q, "kind": "k"}, unique_task(&q)]})),
            Req::body(json!({"queue": q, "kind": "k", "tags": ["t"],
                "debounce": {"key": format!("d-{q}"), "period": "5s", "max_wait": "1m"}})),
        ],
        "POST /v1/tasks/bulk" => {
            n.task(&q, json!({})).await;
            vec![Req::body(json!({
                "action": "cancel", "dry_run": true,
                "filter": {"queue": q, "kind": "k", "states": ["available"], "concurrency_key": "c",
                           "unique_key": "u", "user_id": "u"},
            }))]
        }
        "GET /v1/tasks/bulk/{id}" => {
            let v = n
                .ok(
                    "POST",
                    "/v1/tasks/bulk",
                    Some(json!({"action": "cancel", "filter": {"queue": q}})),
                )
                .await;
            vec![Req::default().param("id", v["id"].clone())]
        }
        "POST /v1/tasks/complete" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({"items": [{
                "id": id, "lease": lease, "result": {"r": 1}, "next_stage": "s2",
                "payload": {"p": 2}, "priority": 2, "run_in": "1s",
            }]}))]
        }
        "POST /v1/tasks/fail" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({"items": [{
                "id": id, "lease": lease, "error": "e", "retry_in": "1s", "permanent": false, "worker": "w",
            }]}))]
        }
        "GET /v1/tasks/{id}" | "POST /v1/tasks/{id}/cancel" => {
            vec![Req::default().param("id", n.task(&q, json!({})).await)]
        }
        "POST /v1/tasks/{id}/retry" => {
            let id = n.task(&q, json!({})).await;
            n.ok("POST", &format!("/v1/tasks/{id}/cancel"), None).await;
            vec![Req::default().param("id", id)]
        }
        "POST /v1/tasks/{id}/run-now" => {
            vec![Req::default().param("id", n.task(&q, json!({"run_in": "1h"})).await)]
        }
        "PATCH /v1/tasks/{id}" => {
            let waiting = n.task(&q, json!({"max_attempts": 5})).await;
            // `attempt` must leave one attempt within `max_attempts`.
            let roomy = n.task(&q, json!({"max_attempts": 2_000_000})).await;
            let (running, lease) = n.claimed().await;
            vec![
                Req::body(json!({
                    "queue": q, "node": "n1", "stage": "s2", "priority": 3, "run_in": "1h",
                    "max_attempts": 4, "payload": {"p": 1},
                    "backoff": {"kind": "linear", "initial": "1s", "max": "1m", "coefficient": 1.0, "jitter": 0.0},
                }))
                .param("id", waiting),
                Req::body(json!({"attempt": 1})).param("id", roomy),
                Req::body(json!({
                    "lease": lease, "progress": {"p": 1}, "priority": 2, "payload": {"p": 2},
                    "backoff": {"kind": "linear", "initial": "1s", "max": "1m", "coefficient": 1.0, "jitter": 0.0},
                }))
                .param("id", running),
            ]
        }
        "POST /v1/tasks/release" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({"items": [{"id": id, "lease": lease}]}))]
        }
        "POST /v1/queues/{queue}/claims/{claim_id}/release" => vec![Req::default()
            .param("queue", q)
            .param("claim_id", uuid::Uuid::new_v4().to_string())],
        "POST /v1/tasks/{id}/complete" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({
                "lease": lease, "result": {"r": 1}, "next_stage": "s2", "payload": {"p": 2},
                "priority": 2, "run_in": "1s",
            }))
            .param("id", id)]
        }
        "POST /v1/tasks/{id}/fail" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({
                "lease": lease, "error": "e", "retry_in": "1s", "permanent": false, "worker": "w",
            }))
            .param("id", id)]
        }
        "POST /v1/tasks/{id}/heartbeat" => {
            let (id, lease) = n.claimed().await;
            vec![Req::body(json!({"lease": lease, "progress": {"p": 1}, "extend": "30s"})).param("id", id)]
        }
        "POST /v1/tokens" => vec![Req::body(json!({
            "name": name, "scopes": ["work"], "queues": ["q"], "expires_in": "1d",
        }))],
        "DELETE /v1/tokens/{name}" => {
            n.ok(
                "POST",
                "/v1/tokens",
                Some(json!({"name": name, "scopes": ["read"]})),
            )
            .await;
            vec![Req::default().param("name", name)]
        }
        "POST /v1/workers/{name}/report" => vec![Req::body(json!({
            "state": "work", "tasks": [1, 2], "queue": q, "kinds": ["k"], "concurrency": 4,
            "host": "h", "pid": 7, "restarts": 1, "started_at": now, "interval": "5s",
            "labels": {"gpu": "a100"},
        }))
        .param("name", name)],
        "POST /v1/workflows" => vec![Req::body(json!({
            "name": "w", "callbacks": callbacks(&q),
            "tasks": [
                wf_task(&q, "a", json!([])),
                wf_task(&q, "b", json!(["a"])),
                wf_task(&q, "c", json!([{"ref": "b", "ignore_failure": true}])),
            ],
            "workflows": [{"ref": "sub", "depends_on": ["a"], "tasks": [wf_task(&q, "d", json!([]))], "workflows": []}],
        }))],
        "GET /v1/workflows/{id}" | "POST /v1/workflows/{id}/cancel" => {
            vec![Req::default().param("id", n.workflow().await)]
        }
        "POST /v1/workflows/{id}/retry" => {
            let id = n.workflow().await;
            n.ok("POST", &format!("/v1/workflows/{id}/cancel"), None)
                .await;
            vec![Req::default().param("id", id)]
        }
        "POST /v1/workflows/{id}/tasks" => vec![Req::body(json!({
            "tasks": [
                wf_task(&q, "x", json!(["a"])),
                wf_task(&q, "z", json!([{"ref": "a", "ignore_failure": false}])),
            ],
            "workflows": [{"ref": "sub2", "depends_on": ["x"], "tasks": [wf_task(&q, "y", json!([]))]}],
        }))
        .param("id", n.workflow().await)],
        "GET /v1/workflow-runs" => vec![Req::default()
            .param("workflow", "w")
            .param("state", "running")
            .param("parent_id", "p")
            .param("created_after", now)
            .param("created_before", now)
            .param("limit", 10)],
        "POST /v1/workflow-runs" => vec![Req::body(json!({
            "workflow": "w", "input": {"i": 1}, "id": uid(), "queue": q, "priority": 1,
            "max_attempts": 3, "timeout": "5m",
        }))],
        "POST /v1/workflow-runs/{id}/events" => {
            let (id, _) = n.run_claimed().await;
            vec![Req::body(json!({"name": "e", "payload": {"p": 1}})).param("id", id)]
        }
        "POST /v1/workflow-runs/{id}/resume" => {
            let (id, lease) = n.run_claimed().await;
            vec![Req::body(json!({"lease": lease})).param("id", id)]
        }
        "POST /v1/workflow-runs/{id}/steps" => {
            let mut out = vec![];
            for steps in run_entries(&q) {
                let (id, lease) = n.run_claimed().await;
                out.push(Req::body(json!({"lease": lease, "steps": steps})).param("id", id));
            }
            out
        }
        "POST /v1/workflow-runs/{id}/finish" => {
            let mut out = vec![];
            let ends = [json!({"result": {"r": 1}}), json!({"error": "e"})];
            for (i, steps) in run_entries(&q).into_iter().enumerate() {
                let (id, lease) = n.run_claimed().await;
                let mut body = json!({"lease": lease, "steps": steps});
                for (k, v) in ends[i % 2].as_object().unwrap() {
                    body[k] = v.clone();
                }
                out.push(Req::body(body).param("id", id));
            }
            out
        }
        "POST /v1/workflow-runs/{id}/suspend" => {
            let mut out = vec![];
            let waits = [
                json!({"seq": 1, "kind": "sleep", "name": "sleep", "until": now}),
                json!({"seq": 1, "kind": "event", "name": "e", "timeout": "1h"}),
                json!({"seq": 1, "kind": "child_wait", "name": "kid", "child_id": uid()}),
            ];
            for (steps, wait) in run_entries(&q).into_iter().zip(waits) {
                let (id, lease) = n.run_claimed().await;
                out.push(
                    Req::body(json!({"lease": lease, "steps": steps, "wait": wait})).param("id", id),
                );
            }
            out
        }
        _ => return None,
    })
}

/// Journal entries with every field set, one per base (a probe of one entry's seq must not
/// meet another's): a step's result, a step's error, a child's start.
fn run_entries(q: &str) -> Vec<Value> {
    vec![
        json!([{"seq": 0, "kind": "step", "name": "a", "output": {"o": 1}, "attempts": 1,
                "started_at": "2030-01-01T00:00:00Z"}]),
        json!([{"seq": 0, "kind": "step", "name": "b", "error": "e", "attempts": 2}]),
        json!([{"seq": 0, "kind": "child", "name": "kid",
                "child": {"id": uid(), "input": {}, "queue": q}}]),
    ]
}

fn error_shaped(v: &Value) -> bool {
    v["error"]["code"].is_string() && v["error"]["message"].is_string()
}

async fn bounds_are_enforced(n: Node) {
    let doc: Value = serde_json::from_str(docket_server::openapi::document()).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    // The rate limits the bases' tasks name: theirs, and the shortest name a probe sets.
    for name in ["rl", "a"] {
        n.ok(
            "PUT",
            &format!("/v1/rate-limits/{name}"),
            Some(json!({"kind": "window", "limit": 1_000_000, "period": "1s"})),
        )
        .await;
    }
    for op in ops(&doc) {
        let label = op.label();
        let mut mine = BTreeSet::new();
        for (_, _, ptr) in &op.params {
            reachable(&doc, ptr, &mut BTreeSet::new(), &mut mine);
        }
        if let Some((ptr, required)) = &op.body {
            reachable(&doc, ptr, &mut BTreeSet::new(), &mut mine);
            if *required {
                mine.insert(format!("{ptr} (required body)"));
            }
        }
        if mine.is_empty() {
            continue;
        }
        let Some(bases) = base(&n, &label).await else {
            failures.push(format!(
                "{label}: has bounds but no base request: add one to `base`"
            ));
            continue;
        };
        // Every probe of every base; the bounded nodes they reach.
        let mut probes = Vec::new();
        let mut probed = BTreeSet::new();
        let mut unreached = Vec::new();
        for (i, b) in bases.iter().enumerate() {
            let (st, v) = send(&n, &op, b).await;
            if !(200..300).contains(&st) {
                failures.push(format!(
                    "{label}: base request {i} answered {st} {v}: fix `base`"
                ));
                continue;
            }
            let mut w = Walker {
                doc: &doc,
                base: i,
                label: &label,
                present: false,
                probes: Vec::new(),
                probed: BTreeSet::new(),
                unreached: Vec::new(),
            };
            for (name, loc, ptr) in &op.params {
                let at = Loc::Param(name.clone());
                if loc == "path" && types(resolve(&doc, ptr).0).contains(&"integer") {
                    // An id at the bound names another resource than the base's: past it only.
                    w.present = false;
                    w.integer(resolve(&doc, ptr).0, &at);
                    w.probed.insert(resolve(&doc, ptr).1);
                } else {
                    w.walk(ptr, b.params.get(name), &at);
                }
            }
            if let (Some((ptr, required)), Some(body)) = (&op.body, &b.body) {
                w.walk(ptr, Some(body), &Loc::Body(Vec::new()));
                if *required {
                    w.probed.insert(format!("{ptr} (required body)"));
                    w.probe(
                        "no body (requestBody required)".into(),
                        Change::NoBody,
                        Expect::Refused,
                    );
                }
            }
            probes.extend(w.probes);
            probed.extend(w.probed);
            unreached.extend(w.unreached.into_iter().map(|u| format!("base {i}: {u}")));
        }
        for missing in mine.difference(&probed) {
            failures.push(format!(
                "{label}: no base request reaches the bounds at {missing}: set the field in `base` (they leave out: {})",
                unreached.join("; ")
            ));
        }
        // Fresh bases for a probe unless every request since they were made was refused: a
        // refused request changes nothing (what the edge promises), so the next probe finds
        // them as made. Making them is most of the test's time (resources per probe).
        let mut fresh: Option<Vec<Req>> = None;
        for p in probes {
            if fresh.is_none() {
                fresh = base(&n, &label).await;
            }
            let mut req = fresh.as_ref().unwrap()[p.base].clone();
            apply(&mut req, &p.change);
            let (st, v) = send(&n, &op, &req).await;
            count += 1;
            // A bound is enforced by refusing the request as invalid: 400, 422 `invalid_task`
            // (a task of the body), or 404 for a path that names nothing (an empty segment does
            // not route).
            let on_path = matches!(&p.change, Change::Set(Loc::Param(name), _)
                if op.params.iter().any(|(n, l, _)| n == name && l == "path"));
            let invalid = st == 400 || (st == 422 && v["error"]["code"] == "invalid_task");
            if !(invalid || (on_path && st == 404)) {
                fresh = None;
            }
            let ok = match p.expect {
                Expect::Refused => (invalid || (on_path && st == 404)) && error_shaped(&v),
                Expect::Accepted => !invalid && st != 413 && st < 500,
            };
            if !ok {
                failures.push(format!(
                    "{label} [base {}] {}: expected {:?}, got {st} {}",
                    p.base,
                    p.what,
                    p.expect,
                    v["error"]["message"]
                        .as_str()
                        .map_or_else(|| short(&v.to_string()), str::to_string)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} probes (or coverage checks) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(count > 500, "only {count} probes");
}

macro_rules! backends {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::pg().await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::sqlite().await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::mysql().await).await; } )* }
    };
}

backends!(bounds_are_enforced);
