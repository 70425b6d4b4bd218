//! nginx's stream access log, in the format the harness configures
//! (`$remote_port|$upstream_addr|$status|$bytes_received|$bytes_sent|
//! $upstream_connect_time|$msec|$server_port`): one [`StreamEntry`] a
//! session.
/// One line of the stream access log.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamEntry {
    pub port: u16,
    /// `$upstream_addr`: every attempt, comma-separated.
    pub upstream_addr: String,
    pub status: u16,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// When the session ended (seconds since the epoch).
    pub msec: f64,
    /// `$server_port`: the listener the session came in on.
    pub server_port: u16,
}

pub fn parse_stream_log(text: &str) -> Vec<StreamEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            Some(StreamEntry {
                port: f.first()?.parse().ok()?,
                upstream_addr: f.get(1)?.to_string(),
                status: f.get(2)?.parse().ok()?,
                bytes_received: f.get(3)?.parse().ok()?,
                bytes_sent: f.get(4)?.parse().ok()?,
                msec: f.get(6)?.parse().ok()?,
                server_port: f.get(7)?.parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_log_lines_parse_and_garbage_is_skipped() {
        let log = "40000|127.0.0.2:1, be0|502|0|0|-|1795984829.033|9000\n\
                   40001|127.0.0.2:1, 127.0.0.4:2|200|65536|65546|0.001|1795984830.5|9001\n\
                   40002|127.0.0.2:1, be0|502|0|0|-|1795984831.000\n\
                   garbage\n";
        let e = parse_stream_log(log);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].port, 40000);
        assert_eq!(e[0].upstream_addr, "127.0.0.2:1, be0");
        assert_eq!(e[0].status, 502);
        assert_eq!(e[1].bytes_received, 65536);
        assert_eq!(e[1].bytes_sent, 65546);
        assert_eq!(e[1].msec, 1795984830.5);
        assert_eq!(e[1].server_port, 9001);
    }
}
