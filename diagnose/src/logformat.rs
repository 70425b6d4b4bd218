//! An nginx `log_format` string turned into a line matcher.
//!
//! The format is a sequence of literal text and `$variable` / `${variable}`
//! tokens. A line matches when every literal is found exactly where the
//! format puts it; a variable's value runs up to the first occurrence of
//! the literal that follows it (or to the end of the line for a trailing
//! variable). nginx's default access-log escaping writes `"` and `\` inside
//! values as `\x22` / `\x5C`, so quotes around a value are safe delimiters.

use std::fmt;

/// One piece of a `log_format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Token {
    /// Text written as is.
    Literal(String),
    /// A variable's value; the name is stored without `$`, lower case.
    Var(String),
}

/// The variables the diagnosis needs: always these two...
pub const REQUIRED: [&str; 2] = ["status", "upstream_addr"];
/// ...and one of these (the first present wins, in this order).
pub const TIME_VARIABLES: [&str; 3] = ["msec", "time_iso8601", "time_local"];
/// Variables used when present (joins and reports).
pub const OPTIONAL: [&str; 4] = ["request", "remote_addr", "connection", "request_id"];

/// Why a `log_format` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// Variables the format must contain; an entry `a|b|c` means one of them.
    Missing(Vec<String>),
    /// A needed variable directly follows or precedes another variable, so
    /// no literal separates their values.
    Adjacent { first: String, second: String },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Missing(names) => {
                let names: Vec<String> = names
                    .iter()
                    .map(|n| {
                        n.split('|')
                            .map(|v| format!("${v}"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    })
                    .collect();
                write!(
                    f,
                    "the log format lacks {}: the diagnosis needs $status, $upstream_addr \
                     and one of $time_iso8601, $time_local, $msec in the access log",
                    names.join(", ")
                )
            }
            FormatError::Adjacent { first, second } => write!(
                f,
                "the log format has ${first} directly followed by ${second}: \
                 with no text between them their values cannot be told apart"
            ),
        }
    }
}

impl std::error::Error for FormatError {}

/// A tokenized `log_format`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFormat {
    tokens: Vec<Token>,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl LogFormat {
    /// Splits a format string into tokens. Never fails: a `$` that starts
    /// no variable name, or a `${` without its `}`, is literal text.
    pub fn tokenize(format: &str) -> LogFormat {
        let mut tokens = Vec::new();
        let mut literal = String::new();
        let mut rest = format;
        while let Some(pos) = rest.find('$') {
            literal.push_str(&rest[..pos]);
            let after = &rest[pos + 1..];
            let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
                match braced.find('}') {
                    Some(end) if end > 0 && braced[..end].chars().all(is_name_char) => {
                        (&braced[..end], end + 2)
                    }
                    _ => ("", 0),
                }
            } else {
                let end = after
                    .find(|c: char| !is_name_char(c))
                    .unwrap_or(after.len());
                (&after[..end], end)
            };
            if name.is_empty() {
                literal.push('$');
                rest = after;
                continue;
            }
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(Token::Var(name.to_ascii_lowercase()));
            rest = &after[consumed..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        LogFormat { tokens }
    }

    /// Tokenizes and checks that the format holds what the diagnosis needs
    /// (see [`REQUIRED`] and [`TIME_VARIABLES`]). The string may also be
    /// given as nginx's configuration writes it, as one or more quoted
    /// pieces (`'$remote_addr ' '"$request"'`): see [`unquote_config`].
    pub fn parse(format: &str) -> Result<LogFormat, FormatError> {
        let text = unquote_config(format).unwrap_or_else(|| format.to_string());
        let parsed = LogFormat::tokenize(&text);
        let mut missing: Vec<String> = REQUIRED
            .iter()
            .filter(|v| !parsed.has(v))
            .map(|v| v.to_string())
            .collect();
        if !TIME_VARIABLES.iter().any(|v| parsed.has(v)) {
            missing.push(TIME_VARIABLES.join("|"));
        }
        if !missing.is_empty() {
            return Err(FormatError::Missing(missing));
        }
        for pair in parsed.tokens.windows(2) {
            if let [Token::Var(a), Token::Var(b)] = pair {
                let used = |v: &str| {
                    REQUIRED.contains(&v) || TIME_VARIABLES.contains(&v) || OPTIONAL.contains(&v)
                };
                if used(a) || used(b) {
                    return Err(FormatError::Adjacent {
                        first: a.clone(),
                        second: b.clone(),
                    });
                }
            }
        }
        Ok(parsed)
    }

    /// The tokens, in order.
    pub fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Whether the format contains `$name` (lower case, without `$`).
    pub fn has(&self, name: &str) -> bool {
        self.position(name).is_some()
    }

    /// The index among the format's variables (the order of
    /// [`LogFormat::match_line`]'s values) of the first `$name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.tokens
            .iter()
            .filter_map(|t| match t {
                Token::Var(v) => Some(v.as_str()),
                Token::Literal(_) => None,
            })
            .position(|v| v == name)
    }

    /// Matches a line: the values of the format's variables in order, or
    /// `None` if the line does not have the format's shape. Of two adjacent
    /// variables the first takes the whole value and the second is empty.
    pub fn match_line<'a>(&self, line: &'a str) -> Option<Vec<&'a str>> {
        let mut values = Vec::new();
        let mut rest = line;
        for (i, token) in self.tokens.iter().enumerate() {
            match token {
                Token::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Token::Var(_) => {
                    let next_literal = self.tokens[i + 1..].iter().find_map(|t| match t {
                        Token::Literal(l) => Some(l.as_str()),
                        Token::Var(_) => None,
                    });
                    let end = match (next_literal, token) {
                        (Some(l), Token::Var(v)) if is_list_variable(v) => list_end(rest, l)?,
                        (Some(l), _) => rest.find(l)?,
                        (None, _) => rest.len(),
                    };
                    values.push(&rest[..end]);
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

/// Variables nginx writes as lists: one item per attempt separated by
/// `", "`, one group per upstream (internal redirects) separated by
/// `" : "` (ngx_http_upstream.c: `$upstream_addr`, `$upstream_status`, the
/// `_time`, `_length` and `_bytes_` variables; the stream module's
/// `$upstream_*` likewise).
pub fn is_list_variable(name: &str) -> bool {
    matches!(
        name,
        "upstream_addr"
            | "upstream_status"
            | "upstream_response_time"
            | "upstream_connect_time"
            | "upstream_header_time"
            | "upstream_first_byte_time"
            | "upstream_session_time"
            | "upstream_response_length"
            | "upstream_bytes_received"
            | "upstream_bytes_sent"
    )
}

/// Where a list variable's value ends in `rest`: at the first `literal`
/// that is not part of a `", "` or `" : "` separator inside the list. So an
/// unquoted `$upstream_addr ` takes `10.0.0.1:80, be : 10.0.0.2:80` whole.
/// If every occurrence is inside a separator, the first one counts.
fn list_end(rest: &str, literal: &str) -> Option<usize> {
    let first = rest.find(literal)?;
    let mut from = first;
    loop {
        let before = &rest[..from];
        let after = &rest[from..];
        let in_separator = after.starts_with(", ")
            || (before.ends_with(',') && after.starts_with(' '))
            || after.starts_with(" : ")
            || (before.ends_with(' ') && after.starts_with(": "))
            || (before.ends_with(" :") && after.starts_with(' '));
        if !in_separator {
            return Some(from);
        }
        match rest[from + 1..].find(literal) {
            Some(i) => from = from + 1 + i,
            None => return Some(first),
        }
    }
}

/// Reads nginx configuration quoting: one or more `'...'` or `"..."`
/// pieces separated by white space, with an optional trailing `;`. Returns
/// the pieces joined (with `\"`, `\'`, `\\`, `\n`, `\t`, `\r` unescaped),
/// or `None` if `s` is not entirely made of such pieces.
pub fn unquote_config(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_suffix(';').unwrap_or(s).trim_end();
    if !s.starts_with(['\'', '"']) {
        return None;
    }
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(quote) = chars.next() else {
            return Some(out);
        };
        if quote != '\'' && quote != '"' {
            return None;
        }
        loop {
            match chars.next()? {
                c if c == quote => break,
                '\\' => match chars.next()? {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    c @ ('"' | '\'' | '\\') => out.push(c),
                    c => {
                        out.push('\\');
                        out.push(c);
                    }
                },
                c => out.push(c),
            }
        }
        if chars.peek().is_some_and(|c| !c.is_whitespace()) {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMBINED_PLUS: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" $msec"#;

    fn vars(f: &LogFormat) -> Vec<&str> {
        f.tokens()
            .iter()
            .filter_map(|t| match t {
                Token::Var(v) => Some(v.as_str()),
                Token::Literal(_) => None,
            })
            .collect()
    }

    #[test]
    fn combined_with_upstream_addr_and_msec() {
        let f = LogFormat::parse(COMBINED_PLUS).expect("valid format");
        assert_eq!(
            vars(&f),
            [
                "remote_addr",
                "remote_user",
                "time_local",
                "request",
                "status",
                "body_bytes_sent",
                "http_referer",
                "http_user_agent",
                "upstream_addr",
                "msec"
            ]
        );
        assert_eq!(f.tokens()[1], Token::Literal(" - ".into()));
        let line = r#"10.1.1.1 - - [01/Dec/2026:07:00:00 +0000] "GET /a?q=\x22x\x22 HTTP/1.1" 502 157 "-" "curl/8.5 \x22quoted\x22" "10.0.0.1:80, be" 1796108400.123"#;
        let v = f.match_line(line).expect("line matches");
        assert_eq!(v[0], "10.1.1.1");
        assert_eq!(v[1], "-");
        assert_eq!(v[2], "01/Dec/2026:07:00:00 +0000");
        assert_eq!(v[3], r"GET /a?q=\x22x\x22 HTTP/1.1");
        assert_eq!(v[4], "502");
        assert_eq!(v[7], r"curl/8.5 \x22quoted\x22");
        assert_eq!(v[8], "10.0.0.1:80, be");
        assert_eq!(v[9], "1796108400.123");
        assert_eq!(f.position("upstream_addr"), Some(8));
    }

    #[test]
    fn braces_and_literal_dollars() {
        let f = LogFormat::tokenize("${status}x$$ ${bad name} $upstream_addr${msec}");
        assert_eq!(
            f.tokens(),
            [
                Token::Var("status".into()),
                Token::Literal("x$$ ${bad name} ".into()),
                Token::Var("upstream_addr".into()),
                Token::Var("msec".into()),
            ]
        );
        let g = LogFormat::parse("${status}|${upstream_addr}|${time_iso8601}").expect("valid");
        assert_eq!(
            g.match_line("502|be|2026-12-01T07:00:00+00:00"),
            Some(vec!["502", "be", "2026-12-01T07:00:00+00:00"])
        );
        assert_eq!(g.match_line("502|be"), None);
    }

    #[test]
    fn missing_status_is_named() {
        let err = LogFormat::parse(r#"$msec "$upstream_addr""#).expect_err("no $status");
        assert_eq!(err, FormatError::Missing(vec!["status".into()]));
        let text = err.to_string();
        assert!(text.contains("lacks $status"), "{text}");
        let err = LogFormat::parse("$remote_addr $request").expect_err("nothing");
        assert_eq!(
            err,
            FormatError::Missing(vec![
                "status".into(),
                "upstream_addr".into(),
                "msec|time_iso8601|time_local".into()
            ])
        );
        assert!(err
            .to_string()
            .contains("$status, $upstream_addr, $msec or $time_iso8601 or $time_local"));
    }

    #[test]
    fn each_time_variable_is_accepted() {
        for t in TIME_VARIABLES {
            let f = LogFormat::parse(&format!("${t} $status \"$upstream_addr\""))
                .unwrap_or_else(|e| panic!("{t}: {e}"));
            assert!(f.has(t));
            assert_eq!(f.position(t), Some(0));
        }
    }

    #[test]
    fn adjacent_needed_variables_are_refused() {
        let err = LogFormat::parse("$status$upstream_addr $msec").expect_err("adjacent");
        assert_eq!(
            err,
            FormatError::Adjacent {
                first: "status".into(),
                second: "upstream_addr".into()
            }
        );
        // Adjacent variables the diagnosis does not read are fine.
        let f = LogFormat::parse("$msec $status $a$b \"$upstream_addr\"").expect("valid");
        assert_eq!(
            f.match_line("1.5 502 xy \"be\""),
            Some(vec!["1.5", "502", "xy", "", "be"])
        );
    }

    #[test]
    fn trailing_text_must_match() {
        let f = LogFormat::parse("$msec $status \"$upstream_addr\"").expect("valid");
        assert_eq!(
            f.match_line("1.5 502 \"be\""),
            Some(vec!["1.5", "502", "be"])
        );
        assert_eq!(f.match_line("1.5 502 \"be\" extra"), None);
        assert_eq!(f.match_line(""), None);
    }

    #[test]
    fn configuration_quoting() {
        assert_eq!(
            unquote_config(r#"'$msec $status ' '"$upstream_addr"';"#).as_deref(),
            Some(r#"$msec $status "$upstream_addr""#)
        );
        assert_eq!(unquote_config("$msec 'x'"), None);
        assert_eq!(unquote_config("'unterminated"), None);
        assert_eq!(unquote_config("'a'b"), None);
        let f = LogFormat::parse(r#"'$msec $status' ' "$upstream_addr"'"#).expect("valid");
        assert_eq!(
            f.match_line("1.5 502 \"be\""),
            Some(vec!["1.5", "502", "be"])
        );
    }

    #[test]
    fn unquoted_lists_are_taken_whole() {
        let f = LogFormat::parse(
            "$remote_addr [$time_local] $status $upstream_addr $upstream_status $msec",
        )
        .expect("valid");
        let line = "10.1.1.1 [01/Dec/2026:07:00:00 +0000] 502 10.0.0.1:80, be : 10.0.0.2:80, api 502, 502 : 200, - 1796108400.123";
        assert_eq!(
            f.match_line(line),
            Some(vec![
                "10.1.1.1",
                "01/Dec/2026:07:00:00 +0000",
                "502",
                "10.0.0.1:80, be : 10.0.0.2:80, api",
                "502, 502 : 200, -",
                "1796108400.123"
            ])
        );
        // Other variables still end at the first occurrence of the text.
        let g = LogFormat::parse("$status $upstream_addr $remote_user $msec").expect("valid");
        assert_eq!(
            g.match_line("502 be x y 1.5"),
            Some(vec!["502", "be", "x", "y 1.5"])
        );
        assert_eq!(
            g.match_line("502 10.0.0.1:80, be - 1.5"),
            Some(vec!["502", "10.0.0.1:80, be", "-", "1.5"])
        );
        // A literal that starts with a separator's text.
        let h = LogFormat::parse("$upstream_addr,$status $msec").expect("valid");
        assert_eq!(
            h.match_line("10.0.0.1:80, be,502 1.5"),
            Some(vec!["10.0.0.1:80, be", "502", "1.5"])
        );
    }
}
