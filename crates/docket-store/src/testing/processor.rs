//! The example processor (`examples/processor.py`) for the test suites of the crates above the
//! store that drive durable processes over HTTP (engine, server, CLI).

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

/// Starts `examples/processor.py` on a port of its own choosing (it prints `PORT n` once it
/// listens, so no other test can take the port in between); the child and its port.
///
/// # Panics
/// When `python3` cannot start or the processor does not say its port.
pub fn spawn_example_processor() -> (Child, u16) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/processor.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg("0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("the processor says its port");
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("processor said {line:?}"));
    (child, port)
}
