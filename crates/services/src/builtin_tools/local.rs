//! [`Local`]: the built-in tools' [`Host`] on this machine, through
//! `tokio::fs` (the files) and [`super::command`] (the commands).

use std::path::Path;

use futures::future::BoxFuture;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::command;
use super::host::{CommandOutcome, CommandRequest, Entry, Host, HostError, Line, Lines, Written};

/// Bytes at the start of a file searched for NUL, the mark of a binary file.
const SNIFF_BYTES: usize = 8192;

/// This machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Host for Local {
    fn read_lines<'a>(
        &'a self,
        path: &'a Path,
        first: usize,
        count: usize,
        max_line_bytes: usize,
    ) -> BoxFuture<'a, Result<Lines, HostError>> {
        Box::pin(read_lines(path, first, count, max_line_bytes))
    }

    fn write<'a>(&'a self, path: &'a Path, content: &'a str) -> BoxFuture<'a, Result<Written, HostError>> {
        Box::pin(write(path, content))
    }

    fn list<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<Vec<Entry>, HostError>> {
        Box::pin(async move {
            let mut entries = Vec::new();
            let mut dir = tokio::fs::read_dir(path).await?;
            while let Some(entry) = dir.next_entry().await? {
                // A symlink to a directory counts as a directory.
                let is_dir = match entry.file_type().await? {
                    kind if kind.is_symlink() => tokio::fs::metadata(entry.path()).await.is_ok_and(|m| m.is_dir()),
                    kind => kind.is_dir(),
                };
                entries.push(Entry { name: entry.file_name().to_string_lossy().into_owned(), is_dir });
            }
            Ok(entries)
        })
    }

    fn run<'a>(&'a self, request: &'a CommandRequest) -> BoxFuture<'a, Result<CommandOutcome, HostError>> {
        Box::pin(command::run(request))
    }
}

async fn read_lines(path: &Path, first: usize, count: usize, max_line_bytes: usize) -> Result<Lines, HostError> {
    let file = tokio::fs::File::open(path).await?;
    if file.metadata().await?.is_dir() {
        return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory).into());
    }
    let mut reader = BufReader::new(file);
    if reader.fill_buf().await?.iter().take(SNIFF_BYTES).any(|b| *b == 0) {
        return Err(HostError::Binary);
    }
    let mut lines = Vec::new();
    let mut bytes = Vec::new();
    let mut number = 0;
    while lines.len() < count {
        let keep = if number + 1 >= first { max_line_bytes } else { 0 };
        let Some(length) = next_line(&mut reader, keep, &mut bytes).await? else {
            // An empty file read from its start is no error.
            let past_end = (first > 1 && number < first).then_some(number);
            return Ok(Lines { lines, past_end, more: false });
        };
        number += 1;
        if number >= first {
            let text = utf8_prefix(&bytes, length > bytes.len()).ok_or(HostError::NotUtf8 { line: number })?;
            let cut = length - text.len();
            // A whole line loses the `\r` of a CRLF ending.
            let text = if cut == 0 { text.strip_suffix('\r').unwrap_or(text) } else { text };
            lines.push(Line { text: text.to_string(), cut });
        }
    }
    let more = !reader.fill_buf().await?.is_empty();
    Ok(Lines { lines, past_end: None, more })
}

/// Reads the next line into `line`, keeping at most `keep` bytes of it;
/// returns its whole length without the newline, or `None` at the end.
async fn next_line<R: AsyncBufRead + Unpin>(reader: &mut R, keep: usize, line: &mut Vec<u8>) -> std::io::Result<Option<usize>> {
    line.clear();
    let (mut length, mut any) = (0, false);
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(any.then_some(length));
        }
        any = true;
        let newline = buf.iter().position(|b| *b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        length += chunk.len();
        let used = newline.map_or(buf.len(), |at| at + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(Some(length));
        }
    }
}

/// The bytes as text; `None` if they are not UTF-8. When they were `cut`
/// from a longer line, a character the cut went through is dropped.
fn utf8_prefix(bytes: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) if cut && e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

/// Writes through a temporary file in the same directory and a rename, so
/// no reader sees a half-written file. A symlink is written through (its
/// target is replaced), and a replaced file keeps its permissions.
async fn write(path: &Path, content: &str) -> Result<Written, HostError> {
    let target = match tokio::fs::canonicalize(path).await {
        Ok(real) => real,
        Err(_) => path.to_path_buf(),
    };
    let previous = tokio::fs::metadata(&target).await.ok();
    if previous.as_ref().is_some_and(|m| m.is_dir()) {
        return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory).into());
    }
    let parent = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(parent).await.map_err(|e| match e.kind() {
        // A file where a directory of the path should be.
        std::io::ErrorKind::AlreadyExists => std::io::Error::from(std::io::ErrorKind::NotADirectory),
        _ => e,
    })?;
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = parent.join(format!(".{name}.{}-{:x}.tmp", std::process::id(), fastrand::u64(..)));
    let written = async {
        let mut file = tokio::fs::File::create(&temporary).await?;
        file.write_all(content.as_bytes()).await?;
        if let Some(previous) = &previous {
            file.set_permissions(previous.permissions()).await?;
        }
        file.sync_all().await?;
        tokio::fs::rename(&temporary, &target).await
    };
    if let Err(error) = written.await {
        let _ = tokio::fs::remove_file(&temporary).await;
        return Err(error.into());
    }
    Ok(Written { replaced: previous.map(|m| m.len()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_cut_and_counted_without_reading_past_the_window() {
        let mut reader = BufReader::with_capacity(4, &b"abcdef\nxy\n\nlast"[..]);
        let mut line = Vec::new();
        assert_eq!(next_line(&mut reader, 3, &mut line).await.unwrap(), Some(6));
        assert_eq!(line, b"abc");
        assert_eq!(next_line(&mut reader, 0, &mut line).await.unwrap(), Some(2));
        assert!(line.is_empty());
        assert_eq!(next_line(&mut reader, 9, &mut line).await.unwrap(), Some(0));
        assert_eq!(next_line(&mut reader, 9, &mut line).await.unwrap(), Some(4));
        assert_eq!(line, b"last");
        assert_eq!(next_line(&mut reader, 9, &mut line).await.unwrap(), None);
    }

    #[test]
    fn a_character_cut_in_two_is_dropped_but_bad_bytes_are_refused() {
        assert_eq!(utf8_prefix("é".as_bytes(), false), Some("é"));
        assert_eq!(utf8_prefix(&"aé".as_bytes()[..2], true), Some("a"));
        assert_eq!(utf8_prefix(&"aé".as_bytes()[..2], false), None, "uncut, a lone lead byte is not UTF-8");
        assert_eq!(utf8_prefix(b"a\xffb", true), None);
    }
}
