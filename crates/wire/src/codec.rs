//! Newline-delimited JSON-RPC framing (the MCP stdio transport).
//!
//! The decoder never ends the stream on bad input: every problem with one
//! line becomes an `Err(FrameError)` item and decoding goes on with the next
//! line. Only I/O errors end the stream. Invariants:
//! - memory held by the decoder is at most `max_frame` bytes plus one read;
//! - a frame longer than `max_frame` is skipped up to its newline and
//!   reported once, with its first bytes ([`FrameError::TooLarge::head`]) so
//!   that the reader can tell which request it answered;
//! - a trailing `\r` (CRLF line endings) is JSON whitespace and is accepted;
//! - after a large frame the read buffer is given back: a connection that
//!   once received a big answer does not keep that much memory for life.

use bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

use serde::Deserialize;

use crate::protocol::{Message, RequestId};

/// Default largest frame: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 * 1024 * 1024;

/// How many leading bytes of an oversized frame are kept for diagnosis.
const HEAD_LEN: usize = 256;

/// What was wrong with one line. The stream continues after each of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// `head` and `tail` are the frame's first and last bytes (at most
    /// 256 each), where its id may be found ([`peek_id`], [`peek_tail_id`]).
    #[error("frame of {size} bytes or more exceeds the {max} byte limit (max_frame); it was skipped")]
    TooLarge { size: usize, max: usize, head: Vec<u8>, tail: Vec<u8> },
    #[error("blank line")]
    Blank,
    #[error("line is not valid UTF-8: {preview}")]
    InvalidUtf8 { preview: String, salvage: Salvage },
    #[error("line is not JSON-RPC ({reason}): {preview}")]
    NotJsonRpc { reason: String, preview: String, salvage: Salvage },
}

impl FrameError {
    /// The error response a peer owes for this line, and the id it answers
    /// when one can be read: `None` for a blank line and for a line that was
    /// meant as a response (answering a response would loop).
    pub fn refusal(&self) -> Option<(Option<RequestId>, crate::protocol::ErrorObject)> {
        use crate::protocol::error_codes;
        let (code, id) = match self {
            FrameError::Blank => return None,
            FrameError::TooLarge { size, max, head, .. } => {
                let message = format!(
                    "message too large: {size} bytes or more, over max_frame ({max} bytes); it was skipped, send it in smaller parts"
                );
                return Some((peek_id(head), crate::protocol::ErrorObject { code: error_codes::INVALID_REQUEST, message, data: None }));
            }
            FrameError::InvalidUtf8 { salvage, .. } | FrameError::NotJsonRpc { salvage, .. } => {
                if salvage.is_answer {
                    return None;
                }
                (error_codes::PARSE_ERROR, salvage.id.clone())
            }
        };
        Some((id, crate::protocol::ErrorObject { code, message: self.to_string(), data: None }))
    }
}

/// What can still be told about a line that is not a usable message, so
/// that the request it answers can be failed at once.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Salvage {
    /// It has the shape of an answer: a JSON object with a `result`,
    /// `error` or `id` member and no `method`.
    pub is_answer: bool,
    /// Its top-level `id`, when it has a usable one.
    pub id: Option<RequestId>,
}

impl Salvage {
    /// Reads what it can of `line`, invalid UTF-8 replaced.
    pub fn of(line: &[u8]) -> Salvage {
        let text = String::from_utf8_lossy(line);
        let Ok(members) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text) else {
            return Salvage::default();
        };
        if members.contains_key("method") {
            return Salvage::default();
        }
        let is_answer = ["result", "error", "id"].iter().any(|key| members.contains_key(*key));
        let id = members.get("id").and_then(|id| RequestId::deserialize(id).ok());
        Salvage { is_answer, id }
    }
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
    /// The last bytes seen so far (at most [`HEAD_LEN`]).
    tail: Vec<u8>,
}

impl Skipping {
    fn saw(&mut self, bytes: &[u8]) {
        keep_tail(&mut self.tail, bytes);
    }
}

/// Read buffers larger than this are reallocated to their content after a frame.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// The room a released buffer keeps for the next read (a pipe's whole
/// buffer). Never less: `FramedRead` reads into spare capacity, and a
/// buffer given back empty would grow by 8 bytes, so skipping an oversized
/// frame would take one read (one thread hop on blocking stdin) per 8 bytes.
pub const READ_CAPACITY: usize = 64 * 1024;

/// Gives the memory of a large frame back, keeping the unread bytes: after
/// a split the rest of the buffer still shares the frame's allocation.
fn release_if_large(buf: &mut BytesMut, frame_len: usize) {
    if frame_len > KEEP_CAPACITY || buf.capacity() > KEEP_CAPACITY {
        let mut fresh = BytesMut::with_capacity(buf.len().max(READ_CAPACITY));
        fresh.extend_from_slice(buf);
        *buf = fresh;
    }
}

/// Appends `bytes` to `tail`, keeping only the last [`HEAD_LEN`] bytes.
fn keep_tail(tail: &mut Vec<u8>, bytes: &[u8]) {
    let bytes = &bytes[bytes.len().saturating_sub(HEAD_LEN)..];
    tail.extend_from_slice(bytes);
    let excess = tail.len().saturating_sub(HEAD_LEN);
    tail.drain(..excess);
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

/// Decodes one complete line (without its newline), or one whole message
/// that came without lines (the HTTP transport's bodies and events).
pub fn decode_line(line: &[u8]) -> Frame {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(FrameError::Blank);
    }
    Message::parse(line).map_err(|reason| match std::str::from_utf8(line) {
        Err(_) => FrameError::InvalidUtf8 { preview: preview(line), salvage: Salvage::of(line) },
        Ok(_) => FrameError::NotJsonRpc { reason, preview: preview(line), salvage: Salvage::of(line) },
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
                skip.saw(buf);
                buf.clear();
                release_if_large(buf, 0);
                self.scanned = 0;
                return Ok(None);
            };
            skip.saw(&buf[..end]);
            let size = skip.size + end;
            let Some(Skipping { head, tail, .. }) = self.skipping.take() else { return Ok(None) };
            buf.advance(end + 1);
            release_if_large(buf, end);
            self.scanned = 0;
            return Ok(Some(Err(FrameError::TooLarge { size, max: self.max_frame, head, tail })));
        }
        match newline {
            Some(end) if end > self.max_frame => {
                let head = buf[..HEAD_LEN.min(end)].to_vec();
                let tail = buf[end.saturating_sub(HEAD_LEN)..end].to_vec();
                buf.advance(end + 1);
                release_if_large(buf, end);
                self.scanned = 0;
                Ok(Some(Err(FrameError::TooLarge { size: end, max: self.max_frame, head, tail })))
            }
            Some(end) => {
                let line = buf.split_to(end + 1);
                release_if_large(buf, end);
                self.scanned = 0;
                Ok(Some(decode_line(&line[..end])))
            }
            None if buf.len() > self.max_frame => {
                let mut skip = Skipping { size: buf.len(), head: buf[..HEAD_LEN.min(buf.len())].to_vec(), tail: Vec::new() };
                skip.saw(buf);
                self.skipping = Some(skip);
                buf.clear();
                release_if_large(buf, 0);
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
            return Ok(Some(Err(FrameError::TooLarge { size: skip.size, max: self.max_frame, head: skip.head, tail: skip.tail })));
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

/// Finds the top-level `"id"` of a JSON-RPC frame from its last bytes, for
/// an oversized response whose id comes last. Only an id that is the last
/// member of the outermost object (followed by the closing brace alone) and
/// follows a `,` or `{` is trusted.
pub fn peek_tail_id(tail: &[u8]) -> Option<RequestId> {
    // The tail may start inside a multi-byte character: skip its rest.
    let start = (0..4.min(tail.len())).find(|&at| std::str::from_utf8(&tail[at..]).is_ok())?;
    let text = std::str::from_utf8(&tail[start..]).ok()?;
    let body = text.trim_end().strip_suffix('}')?.trim_end();
    let at = body.rfind("\"id\"")?;
    if !body[..at].trim_end().ends_with([',', '{']) {
        return None;
    }
    let value = body[at + 4..].trim_start().strip_prefix(':')?.trim();
    serde_json::from_str(value).ok()
}

/// Whether an oversized frame's ends show it to be a request or notification
/// (a `"method"` member) rather than an answer.
pub fn names_a_method(head: &[u8], tail: &[u8]) -> bool {
    let has = |bytes: &[u8]| bytes.windows(8).any(|w| w == b"\"method\"");
    has(head) || has(tail)
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
    fn peeks_the_id_of_an_oversized_frame_from_its_end() {
        assert_eq!(peek_tail_id(br#"xxxx"}]},"id":42}"#), Some(RequestId::Number(42)));
        assert_eq!(peek_tail_id(b"x\"}]} , \"id\" : \"a\" }\r"), Some(RequestId::String("a".into())));
        assert_eq!(peek_tail_id(br#"{"x":{"id":5}}"#), None);
        assert_eq!(peek_tail_id(br#""id":5}"#), None);
        let mut codec = JsonRpcCodec::new(40);
        let big = format!("{{\"jsonrpc\":\"2.0\",\"result\":\"{}\",\"id\":9}}\n", "x".repeat(300));
        let pieces: Vec<&[u8]> = big.as_bytes().chunks(7).collect();
        let mut buf = BytesMut::new();
        let mut tails = Vec::new();
        for piece in pieces {
            buf.extend_from_slice(piece);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                if let Err(FrameError::TooLarge { tail, .. }) = frame {
                    tails.push(peek_tail_id(&tail));
                }
            }
        }
        assert_eq!(tails, [Some(RequestId::Number(9))]);
    }

    #[test]
    fn unusable_answers_are_salvaged() {
        let both = br#"{"jsonrpc":"2.0","id":4,"result":{},"error":{"code":1,"message":"x"}}"#;
        assert_eq!(Salvage::of(both), Salvage { is_answer: true, id: Some(RequestId::Number(4)) });
        let utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"t\":\"\xff\"}}";
        assert!(matches!(
            decode_line(utf8),
            Err(FrameError::InvalidUtf8 { salvage: Salvage { is_answer: true, id: Some(RequestId::Number(3)) }, .. })
        ));
        assert_eq!(Salvage::of(br#"{"method":"x","id":1,"params":5,"result":1}"#), Salvage::default());
        assert_eq!(Salvage::of(b"Server started"), Salvage::default());
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

    /// A reader that hands out as many bytes as each read has room for, and counts the reads.
    struct CountingReader {
        data: Vec<u8>,
        at: usize,
        reads: usize,
    }

    impl tokio::io::AsyncRead for CountingReader {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let n = buf.remaining().min(self.data.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            self.reads += 1;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// Issue 19: after giving back an oversized frame's buffer the reader
    /// read 8 bytes at a time (a 100 MB line on blocking stdin did not end in
    /// 180 s). Skipping must read in chunks of at least READ_CAPACITY.
    #[tokio::test]
    async fn skipping_an_oversized_frame_reads_in_large_chunks() {
        use futures::StreamExt;
        let size = 8 * 1024 * 1024;
        let mut data = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":\"{}\"}}\n", "a".repeat(size)).into_bytes();
        data.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n");
        let mut frames = tokio_util::codec::FramedRead::new(CountingReader { data, at: 0, reads: 0 }, JsonRpcCodec::new(2 * 1024 * 1024));
        assert!(matches!(frames.next().await, Some(Ok(Err(FrameError::TooLarge { .. })))));
        assert!(matches!(frames.next().await, Some(Ok(Ok(Message::Request { .. })))));
        let reads = frames.get_ref().reads;
        assert!(reads <= size / READ_CAPACITY + 64, "{reads} reads for an {size} byte line");
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
