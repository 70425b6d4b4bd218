//! nginx's configuration tokens: blanks separate them, `;`, `{` and `}`
//! end them, quotes (with `\` escapes) keep blanks, `#` starts a comment
//! outside quotes.

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Token {
    Word(String),
    Semi,
    Open,
    Close,
}

pub(super) fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    let mut line = 1;
    let flush = |word: &mut String, out: &mut Vec<Token>| {
        if !word.is_empty() {
            out.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                line += 1;
                flush(&mut word, &mut out);
            }
            c if c.is_whitespace() => flush(&mut word, &mut out),
            '#' if word.is_empty() => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
            }
            ';' | '{' | '}' => {
                flush(&mut word, &mut out);
                out.push(match c {
                    ';' => Token::Semi,
                    '{' => Token::Open,
                    _ => Token::Close,
                });
            }
            '"' | '\'' if word.is_empty() => {
                let quote = c;
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some(n) = chars.next() {
                                // nginx keeps a backslash before anything
                                // but the quote, itself and a few escapes.
                                match n {
                                    '"' | '\'' | '\\' => word.push(n),
                                    'n' => word.push('\n'),
                                    't' => word.push('\t'),
                                    'r' => word.push('\r'),
                                    other => {
                                        word.push('\\');
                                        word.push(other);
                                    }
                                }
                            }
                        }
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        '\n' => {
                            line += 1;
                            word.push('\n');
                        }
                        c => word.push(c),
                    }
                }
                if !closed {
                    return Err(format!("unterminated quote from line {line}"));
                }
                // A quoted empty string is still an argument.
                out.push(Token::Word(std::mem::take(&mut word)));
            }
            c => word.push(c),
        }
    }
    flush(&mut word, &mut out);
    Ok(out)
}
