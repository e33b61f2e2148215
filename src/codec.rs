//! Newline-delimited JSON-RPC framing (the MCP stdio transport).
//!
//! The decoder never ends the stream on bad input: every problem with one
//! line becomes an `Err(FrameError)` item and decoding goes on with the next
//! line. Only I/O errors end the stream. Invariants:
//! - memory held by the decoder is at most `max_frame` bytes plus one read;
//! - a frame longer than `max_frame` is skipped up to its newline and
//!   reported once, with its first bytes ([`FrameError::TooLarge::head`]) so
//!   that the reader can tell which request it answered;
//! - a trailing `\r` (CRLF line endings) is JSON whitespace and is accepted.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

use crate::protocol::Message;

/// Default largest frame: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// How many leading bytes of an oversized frame are kept for diagnosis.
const HEAD_LEN: usize = 256;

/// What was wrong with one line. The stream continues after each of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes or more exceeds the {max} byte limit (max_frame); it was skipped")]
    TooLarge { size: usize, max: usize, head: Vec<u8> },
    #[error("blank line")]
    Blank,
    #[error("line is not valid UTF-8: {preview}")]
    InvalidUtf8 { preview: String },
    #[error("line is not JSON-RPC ({reason}): {preview}")]
    NotJsonRpc { reason: String, preview: String },
}

impl FrameError {
    /// Blank lines are noise, not a sign of a broken server.
    pub fn is_noise(&self) -> bool {
        matches!(self, FrameError::Blank)
    }
}

/// The decoder's item: a message, or a report about a line that was skipped.
pub type Frame = Result<Message, FrameError>;

#[derive(Debug)]
pub struct JsonRpcCodec {
    max_frame: usize,
    /// Where the newline search resumes (bytes before it hold no newline).
    scanned: usize,
    /// Set while skipping the rest of an oversized frame.
    skipping: Option<Skipping>,
}

#[derive(Debug)]
struct Skipping {
    size: usize,
    head: Vec<u8>,
}

impl JsonRpcCodec {
    pub fn new(max_frame: usize) -> Self {
        JsonRpcCodec { max_frame, scanned: 0, skipping: None }
    }
}

impl Default for JsonRpcCodec {
    fn default() -> Self {
        JsonRpcCodec::new(DEFAULT_MAX_FRAME)
    }
}

fn preview(line: &[u8]) -> String {
    const MAX: usize = 120;
    let cut = &line[..line.len().min(MAX)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if line.len() > MAX {
        s.push('…');
    }
    s
}

/// Decodes one complete line (without its newline).
fn decode_line(line: &[u8]) -> Frame {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(FrameError::Blank);
    }
    Message::parse(line).map_err(|reason| match std::str::from_utf8(line) {
        Err(_) => FrameError::InvalidUtf8 { preview: preview(line) },
        Ok(_) => FrameError::NotJsonRpc { reason, preview: preview(line) },
    })
}

impl Decoder for JsonRpcCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        let newline = buf[self.scanned..].iter().position(|b| *b == b'\n').map(|i| i + self.scanned);
        if let Some(skip) = &mut self.skipping {
            // The head is the frame's first bytes however the frame was cut into reads.
            let room = HEAD_LEN.saturating_sub(skip.head.len());
            skip.head.extend_from_slice(&buf[..room.min(newline.unwrap_or(buf.len()))]);
            let Some(end) = newline else {
                skip.size += buf.len();
                buf.clear();
                self.scanned = 0;
                return Ok(None);
            };
            let skip = self.skipping.take().unwrap_or_else(|| unreachable!());
            buf.advance(end + 1);
            self.scanned = 0;
            return Ok(Some(Err(FrameError::TooLarge { size: skip.size + end, max: self.max_frame, head: skip.head })));
        }
        match newline {
            Some(end) if end > self.max_frame => {
                let head = buf[..HEAD_LEN.min(end)].to_vec();
                buf.advance(end + 1);
                self.scanned = 0;
                Ok(Some(Err(FrameError::TooLarge { size: end, max: self.max_frame, head })))
            }
            Some(end) => {
                let line = buf.split_to(end + 1);
                self.scanned = 0;
                Ok(Some(decode_line(&line[..end])))
            }
            None if buf.len() > self.max_frame => {
                self.skipping = Some(Skipping { size: buf.len(), head: buf[..HEAD_LEN.min(buf.len())].to_vec() });
                buf.clear();
                self.scanned = 0;
                Ok(None)
            }
            None => {
                self.scanned = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        if let Some(skip) = self.skipping.take() {
            return Ok(Some(Err(FrameError::TooLarge { size: skip.size, max: self.max_frame, head: skip.head })));
        }
        if buf.is_empty() {
            return Ok(None);
        }
        // A last line without its newline: decode it rather than lose it.
        let line = buf.split();
        self.scanned = 0;
        Ok(Some(decode_line(&line)))
    }
}

/// Finds the top-level `"id"` of a JSON-RPC frame from its first bytes, for an
/// oversized response that cannot be parsed whole. The members before it
/// are read as JSON (so an `"id"` inside a key, a string or a nested value
/// is never taken for it), and the id must be followed by `,` or `}` (so a
/// number cut short by the end of the head is not taken either).
pub fn peek_id(head: &[u8]) -> Option<crate::protocol::RequestId> {
    let valid = match std::str::from_utf8(head) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).ok()?,
    };
    let mut rest = valid.trim_start().strip_prefix('{')?;
    loop {
        let (key, after) = next_json::<String>(rest)?;
        let after = after.trim_start().strip_prefix(':')?;
        if key == "id" {
            let (id, after) = next_json(after)?;
            return after.trim_start().starts_with([',', '}']).then_some(id);
        }
        let (serde::de::IgnoredAny, after) = next_json(after)?;
        rest = after.trim_start().strip_prefix(',')?;
    }
}

/// The JSON value at the start of `text` (after whitespace) and the text after it.
fn next_json<'a, T: serde::Deserialize<'a>>(text: &'a str) -> Option<(T, &'a str)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<T>();
    let value = values.next()?.ok()?;
    Some((value, &text[values.byte_offset()..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RequestId;
    use proptest::prelude::*;

    fn decode_all(codec: &mut JsonRpcCodec, chunks: &[&[u8]]) -> Vec<String> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                out.push(describe(frame));
            }
        }
        while let Some(frame) = codec.decode_eof(&mut buf).unwrap() {
            out.push(describe(frame));
        }
        out
    }

    fn describe(frame: Frame) -> String {
        match frame {
            Ok(Message::Request { id, method, .. }) => format!("req {id} {method}"),
            Ok(Message::Notification { method, .. }) => format!("note {method}"),
            Ok(Message::Response { id, outcome }) => match outcome {
                Ok(r) => format!("ok {id:?} {}", r.get()),
                Err(e) => format!("err {id:?} {}", e.code),
            },
            Err(FrameError::TooLarge { size, .. }) => format!("too large {size}"),
            Err(e) => format!("bad {}", e.to_string().split(':').next().unwrap_or_default()),
        }
    }

    #[test]
    fn bad_lines_are_items_and_the_stream_goes_on() {
        let mut codec = JsonRpcCodec::new(64);
        let input: &[u8] =
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\nnot json\n\xff\xfe\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n";
        assert_eq!(
            decode_all(&mut codec, &[input]),
            [
                "ok Some(Number(1)) {}",
                "bad blank line",
                "bad line is not JSON-RPC (expected ident at line 1 column 2)",
                "bad line is not valid UTF-8",
                "note m"
            ]
        );
    }

    #[test]
    fn oversized_frames_are_skipped_whole() {
        let mut codec = JsonRpcCodec::new(40);
        let big = format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":\"{}\"}}\n", "x".repeat(100));
        let ok = b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":1}\n";
        // Arriving in one piece, and trickling in small reads.
        assert_eq!(decode_all(&mut codec, &[big.as_bytes(), ok]), ["too large 136", "ok Some(Number(2)) 1"]);
        let pieces: Vec<&[u8]> = big.as_bytes().chunks(7).chain([&ok[..]]).collect();
        let mut codec = JsonRpcCodec::new(40);
        assert_eq!(decode_all(&mut codec, &pieces), ["too large 136", "ok Some(Number(2)) 1"]);
    }

    #[test]
    fn last_line_without_newline_is_decoded() {
        let mut codec = JsonRpcCodec::default();
        assert_eq!(decode_all(&mut codec, &[b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}"]), ["note m"]);
    }

    #[test]
    fn peeks_the_top_level_id_of_an_oversized_frame() {
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"#), Some(RequestId::Number(42)));
        assert_eq!(peek_id(br#"{ "id" : "a-1" , "result""#), Some(RequestId::String("a-1".into())));
        assert_eq!(peek_id(br#"{"result":{"id":5,"#), None);
        assert_eq!(peek_id(b"garbage"), None);
    }

    /// Found by fuzzing (fuzz target `answer`): a text search took an `"id"`
    /// inside a key or a string for the frame's id, and so failed another call.
    #[test]
    fn peek_id_reads_only_the_frames_own_id() {
        assert_eq!(peek_id(br#"{"x\"id":5,"id":3,"result":{"#), Some(RequestId::Number(3)));
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","note":"\"id\":7,","id":8,"result":"#), Some(RequestId::Number(8)));
        assert_eq!(peek_id(br#"{"error":{"code":1,"message":"m"},"id":"e"}"#), Some(RequestId::String("e".into())));
        // Cut short: 12 could be the start of 123.
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","id":12"#), None);
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","id":null,"error":"#), None);
    }

    /// Found by fuzzing (fuzz target `codec`): an oversized frame that
    /// arrived in small reads kept only the bytes of the read that crossed
    /// max_frame as its head, so its id could be missed.
    #[test]
    fn the_head_of_an_oversized_frame_does_not_depend_on_the_reads() {
        let big = format!("{{\"jsonrpc\":\"2.0\",\"result\":\"{}\",\"id\":4}}\n", "x".repeat(100));
        let head = |chunks: &[&[u8]]| {
            let (mut codec, mut buf) = (JsonRpcCodec::new(20), BytesMut::new());
            let mut heads = Vec::new();
            for chunk in chunks {
                buf.extend_from_slice(chunk);
                while let Some(frame) = codec.decode(&mut buf).unwrap() {
                    if let Err(FrameError::TooLarge { head, .. }) = frame {
                        heads.push(head);
                    }
                }
            }
            heads
        };
        let whole = head(&[big.as_bytes()]);
        assert_eq!(whole, [big.as_bytes()[..HEAD_LEN.min(big.len() - 1)].to_vec()]);
        assert_eq!(head(&big.as_bytes().chunks(7).collect::<Vec<_>>()), whole);
    }

    fn message_line() -> impl Strategy<Value = String> {
        prop_oneof![
            (any::<i64>(), "[a-z/]{1,12}").prop_map(|(id, m)| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{m}","params":{{}}}}"#)),
            (any::<u32>(), ".{0,40}").prop_map(|(id, text)| {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":{}}}}}"#, serde_json::to_string(&text).unwrap())
            }),
            "[a-z_/]{1,20}".prop_map(|m| format!(r#"{{"jsonrpc":"2.0","method":"{m}"}}"#)),
        ]
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), max in 1usize..256, cut in 0usize..2048) {
            let mut codec = JsonRpcCodec::new(max);
            let cut = cut.min(bytes.len());
            let _ = decode_all(&mut codec, &[&bytes[..cut], &bytes[cut..]]);
        }

        #[test]
        fn frames_split_anywhere_decode_identically(lines in proptest::collection::vec(message_line(), 1..8), cuts in proptest::collection::vec(any::<usize>(), 0..6)) {
            let input = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
            let whole = decode_all(&mut JsonRpcCodec::default(), &[input.as_bytes()]);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for p in points { chunks.push(&input.as_bytes()[at..p]); at = p; }
            chunks.push(&input.as_bytes()[at..]);
            prop_assert_eq!(whole.len(), lines.len());
            prop_assert_eq!(decode_all(&mut JsonRpcCodec::default(), &chunks), whole);
        }
    }
}
