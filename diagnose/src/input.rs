//! Reading log files line by line, plain or gzip (told apart by the magic
//! bytes `1f 8b`, not by the name), streaming: one line in memory at a time.
//! The path `-` is standard input, plain or gzip alike.
//!
//! Lines are bytes (a log may hold anything); a line longer than
//! [`MAX_LINE`] is cut there. A truncated or corrupt gzip stream is an
//! error naming the file.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::MultiGzDecoder;

/// The longest line kept; the rest of a longer line is dropped.
pub const MAX_LINE: usize = 64 * 1024;

/// A file that could not be read.
#[derive(Debug)]
pub struct InputError {
    /// The file.
    pub path: PathBuf,
    /// What went wrong.
    pub problem: Problem,
}

/// What went wrong with a file.
#[derive(Debug)]
pub enum Problem {
    /// It could not be opened.
    Open(io::Error),
    /// Reading it failed.
    Read(io::Error),
    /// The gzip stream ends early.
    TruncatedGzip,
    /// The gzip stream is damaged.
    CorruptGzip(io::Error),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = display_name(&self.path);
        match &self.problem {
            Problem::Open(e) => write!(f, "{path}: cannot open: {e}"),
            Problem::Read(e) => write!(f, "{path}: read error: {e}"),
            Problem::TruncatedGzip => write!(f, "{path}: truncated gzip stream"),
            Problem::CorruptGzip(e) => write!(f, "{path}: corrupt gzip stream ({e})"),
        }
    }
}

impl std::error::Error for InputError {}

/// The path that names standard input.
pub const STDIN: &str = "-";

/// Whether `path` is `-`, standard input.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// How messages and the report name `path`: `stdin` for `-`.
pub fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "stdin".to_string()
    } else {
        path.display().to_string()
    }
}

/// Where standard input stands now, if it is a regular file (redirected
/// with `< FILE`), so that [`stdin_from`] can read it again from there;
/// `None` for a pipe or a terminal, which can be read once only.
pub fn stdin_position() -> Option<u64> {
    #[cfg(unix)]
    {
        use std::io::Seek;
        use std::os::fd::AsFd;
        let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
        let mut file = File::from(fd);
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        file.stream_position().ok()
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Standard input as a file, rewound to `position` (from
/// [`stdin_position`]), to read it again.
pub fn stdin_from(position: u64) -> Option<File> {
    #[cfg(unix)]
    {
        use std::io::{Seek, SeekFrom};
        use std::os::fd::AsFd;
        let fd = io::stdin().as_fd().try_clone_to_owned().ok()?;
        let mut file = File::from(fd);
        file.seek(SeekFrom::Start(position)).ok()?;
        Some(file)
    }
    #[cfg(not(unix))]
    {
        let _ = position;
        None
    }
}

/// Whether bytes start with the gzip magic number.
pub fn is_gzip(head: &[u8]) -> bool {
    head.starts_with(&[0x1f, 0x8b])
}

/// Calls `each` with every line of the file at `path` (without its `\n`
/// or `\r\n`), decompressing it if it is gzip.
pub fn for_each_line(path: &Path, mut each: impl FnMut(&[u8])) -> Result<(), InputError> {
    for_each_line_while(path, |line| {
        each(line);
        true
    })
}

/// Like [`for_each_line`], but stops after the first line for which
/// `each` returns false. The path `-` reads standard input.
pub fn for_each_line_while(path: &Path, each: impl FnMut(&[u8]) -> bool) -> Result<(), InputError> {
    if is_stdin(path) {
        return for_each_line_of(path, io::stdin().lock(), each);
    }
    let file = File::open(path).map_err(|e| InputError {
        path: path.to_path_buf(),
        problem: Problem::Open(e),
    })?;
    for_each_line_of(path, file, each)
}

/// Like [`for_each_line_while`], for a stream already open; `path` names
/// it in errors.
pub fn for_each_line_of(
    path: &Path,
    mut file: impl Read,
    each: impl FnMut(&[u8]) -> bool,
) -> Result<(), InputError> {
    let fail = |problem| InputError {
        path: path.to_path_buf(),
        problem,
    };
    let mut magic = [0u8; 2];
    let mut have = 0;
    while have < magic.len() {
        match file.read(&mut magic[have..]) {
            Ok(0) => break,
            Ok(n) => have += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(Problem::Read(e))),
        }
    }
    let head = &magic[..have];
    let stream = head.chain(file);
    if is_gzip(head) {
        let reader = BufReader::new(MultiGzDecoder::new(stream));
        read_lines_while(reader, each).map_err(|e| {
            fail(if e.kind() == io::ErrorKind::UnexpectedEof {
                Problem::TruncatedGzip
            } else {
                Problem::CorruptGzip(e)
            })
        })
    } else {
        read_lines_while(BufReader::new(stream), each).map_err(|e| fail(Problem::Read(e)))
    }
}

/// Calls `each` with every line of `reader`, at most [`MAX_LINE`] bytes of
/// each; a last line without `\n` counts.
pub fn read_lines<R: BufRead>(reader: R, mut each: impl FnMut(&[u8])) -> io::Result<()> {
    read_lines_while(reader, |line| {
        each(line);
        true
    })
}

/// Like [`read_lines`], but stops after the first line for which `each`
/// returns false.
pub fn read_lines_while<R: BufRead>(
    mut reader: R,
    mut each: impl FnMut(&[u8]) -> bool,
) -> io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut pending = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if pending {
                emit(&mut line, &mut each);
            }
            return Ok(());
        }
        let (take, used, complete) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i, i + 1, true),
            None => (chunk.len(), chunk.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(used);
        pending = !complete;
        if complete && !emit(&mut line, &mut each) {
            return Ok(());
        }
    }
}

fn emit(line: &mut Vec<u8>, each: &mut impl FnMut(&[u8]) -> bool) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let more = each(line);
    line.clear();
    more
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(data: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        read_lines(data, |l| out.push(l.to_vec())).expect("in memory");
        out
    }

    #[test]
    fn splits_lines() {
        assert_eq!(lines(b"a\nb\r\n\nc"), [&b"a"[..], b"b", b"", b"c"]);
        assert_eq!(lines(b"a\n"), [b"a"]);
        assert!(lines(b"").is_empty());
        assert_eq!(lines(b"\xff\xfe\n"), [b"\xff\xfe"]);
    }

    #[test]
    fn long_lines_are_cut() {
        let mut data = vec![b'x'; MAX_LINE * 3];
        data.extend_from_slice(b"\nshort\n");
        let l = lines(&data);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].len(), MAX_LINE);
        assert_eq!(l[1], b"short");
    }

    #[test]
    fn stops_when_asked() {
        let mut seen = Vec::new();
        read_lines_while(&b"a\nb\nc\n"[..], |l| {
            seen.push(l.to_vec());
            seen.len() < 2
        })
        .expect("in memory");
        assert_eq!(seen, [b"a", b"b"]);
    }

    #[test]
    fn magic() {
        assert!(is_gzip(&[0x1f, 0x8b, 8]));
        assert!(!is_gzip(&[0x1f]));
        assert!(!is_gzip(b"2026/"));
    }
}
