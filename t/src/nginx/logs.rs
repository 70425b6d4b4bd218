//! What a running nginx wrote (error, access and stream logs), and the
//! verdict when it stops: no fatal line, memcheck clean, and with the
//! module every generation-busy selection rescued or failed.

use std::fs;
use std::time::{Duration, Instant};

use super::process::pause;
use super::Nginx;
use crate::memcheck;
use crate::scoring::accesslog::{self, Entry};
use crate::scoring::errorlog;

impl Nginx {
    pub fn error_log(&self) -> String {
        fs::read_to_string(self.prefix.join("logs/error.log")).unwrap_or_default()
    }

    /// The stream access log's lines (`$remote_port|$upstream_addr|$status|
    /// $bytes_received|$bytes_sent|$upstream_connect_time|$msec|$server_port`).
    pub fn stream_log(&self) -> String {
        fs::read_to_string(self.prefix.join("logs/stream.log")).unwrap_or_default()
    }

    pub fn access_log(&self) -> Vec<Entry> {
        accesslog::parse(&self.access_log_text())
    }

    /// The access log as written.
    pub fn access_log_text(&self) -> String {
        fs::read_to_string(self.prefix.join("logs/access.log")).unwrap_or_default()
    }

    /// The access log entry for `path` (the tests give each request its own).
    pub fn access_entry(&self, path: &str) -> Option<Entry> {
        self.access_log().into_iter().find(|e| e.path == path)
    }

    /// Waits (bounded: 5 s, six times that under memcheck) until the access
    /// log holds `n` lines whose path starts with `prefix`, and returns
    /// them, fewer if the bound passed: a worker logs a request just after
    /// its last byte left, so a client can finish before the line is
    /// written.
    pub async fn access_entries(&self, prefix: &str, n: usize) -> Vec<Entry> {
        let deadline = Instant::now() + memcheck::patience(Duration::from_secs(5));
        loop {
            let lines: Vec<Entry> = self
                .access_log()
                .into_iter()
                .filter(|e| e.path.starts_with(prefix))
                .collect();
            if lines.len() >= n || Instant::now() >= deadline {
                return lines;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every upstream on the module's status page (`/status` on nginx's
    /// port) counted each generation-busy selection as rescued or failed,
    /// one of the two: busy (first + retry) = rescued + failed. Read with
    /// a blocking HTTP/1.0 GET, so a test's synchronous `finish` can call
    /// it once its requests are done.
    pub fn assert_busy_is_rescued_plus_failed(&self) {
        // A selection counts busy, then rescued or failed, in one call: a
        // status read between the two (a request still in flight) may see
        // busy ahead, so the check is repeated briefly before it fails.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.busy_balance() {
                Ok(()) => return,
                Err(e) if Instant::now() >= deadline => panic!("{e}"),
                Err(_) => pause(Duration::from_millis(50)),
            }
        }
    }

    fn busy_balance(&self) -> Result<(), String> {
        use crate::scoring::metrics::{Counter, StatusExt};
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.addr()).expect("connect for the status");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET /status?format=json HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .expect("send the status request");
        let mut response = String::new();
        s.read_to_string(&mut response).expect("read the status");
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("status: {response}"));
        assert!(head.starts_with("HTTP/1.1 200"), "status: {head}");
        let status: serde_json::Value = serde_json::from_str(body).expect("status JSON");
        let upstreams = status["upstreams"].as_array().expect("upstreams");
        for u in upstreams {
            let busy = u.count(Counter::BusyFirst) + u.count(Counter::BusyRetry);
            let settled = u.count(Counter::Rescued) + u.count(Counter::Failed);
            if busy != settled {
                return Err(format!(
                    "busy (first + retry) {busy} != rescued + failed {settled}: a \
                     generation-busy selection ended neither way, or twice: {u}"
                ));
            }
        }
        Ok(())
    }

    /// Stops nginx whose worker a test expected to die (a fork's known
    /// crash, proven so that its fix is noticed): fails unless the error
    /// log says a worker `exited on signal`; returns the log.
    pub fn finish_crashed(mut self) -> String {
        self.stop();
        self.checked = true;
        let log = self.error_log();
        assert!(
            log.contains("exited on signal"),
            "expected a worker to exit on a signal:\n{log}"
        );
        log
    }

    /// Stops nginx and returns its error log, judging nothing: for a run
    /// that judges the log itself (the soak).
    pub fn stop_unchecked(mut self) -> String {
        self.stop();
        self.checked = true;
        self.error_log()
    }

    /// Stops nginx whose log a test expects to hold fatal lines (a worker
    /// it killed, a reload it made fail): fails unless each of `expected`
    /// is in some fatal line and every fatal line holds one of them;
    /// returns the log.
    pub fn finish_expecting(mut self, expected: &[&str]) -> String {
        self.stop();
        self.checked = true;
        let log = self.error_log();
        let fatal = errorlog::fatal_lines(&log);
        let unexpected: Vec<&&str> = fatal
            .iter()
            .filter(|l| !expected.iter().any(|e| l.contains(e)))
            .collect();
        assert!(
            unexpected.is_empty(),
            "unexpected fatal lines: {unexpected:#?}"
        );
        for e in expected {
            assert!(
                fatal.iter().any(|l| l.contains(e)),
                "no fatal line with {e:?}:\n{log}"
            );
        }
        log
    }

    /// Stops nginx and fails on any of [`errorlog::FATAL_MARKERS`].
    pub fn finish(mut self) {
        self.stop();
        self.checked = true;
        let log = self.error_log();
        let fatal = errorlog::fatal_lines(&log);
        assert!(
            fatal.is_empty(),
            "nginx error.log has fatal lines:\n{}",
            fatal.join("\n")
        );
        if let Err(e) = self.memcheck_verdict() {
            panic!("{e}");
        }
    }

    /// Under memcheck, once stopped: its log must show no error and no
    /// definitely lost block.
    fn memcheck_verdict(&self) -> Result<(), String> {
        let Some(log) = &self.memcheck else {
            return Ok(());
        };
        let report = memcheck::read(log);
        if report.clean() {
            Ok(())
        } else {
            Err(report.describe(log))
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "nginx prefix kept for inspection: {}",
                self.prefix.display()
            );
            return;
        }
        if !self.checked {
            let log = self.error_log();
            let fatal = errorlog::fatal_lines(&log);
            if !fatal.is_empty() {
                panic!("nginx error.log has fatal lines:\n{}", fatal.join("\n"));
            }
            if let Err(e) = self.memcheck_verdict() {
                panic!("{e}");
            }
        }
        let _ = fs::remove_dir_all(&self.prefix);
    }
}
