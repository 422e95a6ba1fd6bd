//! The Python harness as long-lived `python -m nki_harness serve` processes:
//! a test binary runs hundreds of kernels under the NumPy executor, and one
//! process each paid the interpreter's, NumPy's and the executor's start-up
//! (about half a second) every time.
//!
//! Each server answers one request at a time; a test thread takes an idle
//! server from the pool (or starts one), and gives it back after the answer.
//! A server that dies or answers garbage is dropped and the request runs in a
//! process of its own, exactly as before, so the answer never depends on the
//! pool.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

/// One running `serve` process.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn start(python: &Path, env: &[(&str, &Path)]) -> Option<Server> {
        let mut cmd = Command::new(python);
        cmd.args(["-m", "nki_harness", "serve"]).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().ok()?;
        let stdin = child.stdin.take()?;
        let stdout = BufReader::new(child.stdout.take()?);
        Some(Server { child, stdin, stdout })
    }

    /// Sends one request; `None` when the server is gone or answers out of
    /// protocol.
    fn ask(&mut self, request: &Value) -> Option<(bool, String, String)> {
        writeln!(self.stdin, "{request}").ok()?;
        self.stdin.flush().ok()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let answer: Value = serde_json::from_str(&line).ok()?;
        let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_owned);
        Some((answer.get("status")?.as_i64()? == 0, text("stdout")?, text("stderr")?))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Idle servers.
static IDLE: Mutex<Vec<Server>> = Mutex::new(Vec::new());

/// Runs `nki_harness <args>` with environment changes `env` (`None` removes
/// a variable) on a pooled server; `None` when no server could answer.
pub fn ask(python: &Path, base_env: &[(&str, &Path)], args: &[&str], env: &[(&str, Option<&str>)]) -> Option<(bool, String, String)> {
    let idle = IDLE.lock().unwrap_or_else(|e| e.into_inner()).pop();
    let mut server = idle.or_else(|| Server::start(python, base_env))?;
    let env: serde_json::Map<String, Value> = env.iter().map(|(k, v)| (k.to_string(), v.map_or(Value::Null, |v| json!(v)))).collect();
    let answer = server.ask(&json!({ "argv": args, "env": env }))?;
    // A server that exited after answering (its launch timed out) is not reused.
    if matches!(server.child.try_wait(), Ok(None)) {
        IDLE.lock().unwrap_or_else(|e| e.into_inner()).push(server);
    }
    Some(answer)
}
