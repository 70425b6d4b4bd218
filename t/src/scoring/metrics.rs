//! The module's contract with the tests, from the module's own core crate:
//! metric names and JSON paths ([`Counter`]), and the error-log lines
//! ([`log`]). Tests look values up through these instead of retyping them.

pub use generation_retry_core::log;
pub use generation_retry_core::metrics::{Counter, NoLiveCause, Protocol, Value, FAMILIES};

/// Counter lookup in one upstream's object of the status endpoint's JSON.
pub trait StatusExt {
    /// The counter's value; panics, naming it, when it is missing.
    fn count(&self, c: Counter) -> u64;
    /// The counter's value, `None` when it is missing.
    fn counter(&self, c: Counter) -> Option<u64>;
}

impl StatusExt for serde_json::Value {
    fn count(&self, c: Counter) -> u64 {
        self.counter(c)
            .unwrap_or_else(|| panic!("no {c:?} at {:?} in {self}", c.json_path()))
    }

    fn counter(&self, c: Counter) -> Option<u64> {
        c.json_path().iter().fold(self, |v, k| &v[*k]).as_u64()
    }
}

/// One sample line of the Prometheus text format: the metric name, its
/// labels (values unescaped), the value as written (a `u64` counter or
/// generation loses nothing to a float).
pub type Sample = (String, Vec<(String, String)>, String);

/// One sample line, parsed strictly: names as the format allows them,
/// each label once, only the three escapes, one space before the value.
/// The one reader of the text format in the tests (the fuzzer's, the
/// scrapes', the exposition's).
pub fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .ok_or("no labels or value")?;
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("bad metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = r;
        loop {
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=').ok_or("label without =")?;
            let label = &rest[..eq];
            if label.is_empty()
                || !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                || label.starts_with(|c: char| c.is_ascii_digit())
            {
                return Err(format!("bad label name {label:?}"));
            }
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((i, '"')) => break i,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        Some((_, 'n')) => value.push('\n'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, '\n')) => return Err("raw newline in a label value".into()),
                    Some((_, c)) => value.push(c),
                }
            };
            if labels.iter().any(|(l, _)| l == label) {
                return Err(format!("label {label} twice"));
            }
            labels.push((label.to_owned(), value));
            rest = &rest[end + 1..];
            if let Some(r) = rest.strip_prefix(',') {
                rest = r;
            } else if !rest.starts_with('}') {
                return Err("labels not separated by ,".into());
            }
        }
    }
    let value = rest.strip_prefix(' ').ok_or("no space before the value")?;
    if value.is_empty() || value.contains(char::is_whitespace) {
        return Err(format!("value {value:?}"));
    }
    Ok((name.to_owned(), labels, value.to_owned()))
}

/// Every sample of a text exposition (comment lines left out), each line
/// parsed by [`parse_sample`]; the error names the line.
pub fn parse_exposition(body: &str) -> Result<Vec<Sample>, String> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| parse_sample(l).map_err(|e| format!("{e}: {l:?}")))
        .collect()
}
