//! Server-sent events (the WHATWG "event stream" format), decoded in one
//! pass: every byte is looked at once however the stream is cut into
//! chunks, so a long event costs linear time, not a re-scan per chunk.
//!
//! Lines end with CRLF, LF or a lone CR (a CRLF split across two chunks is
//! one line end); a leading BOM is dropped; `:` starts a comment; `data`
//! lines join with `\n`; `id` (without NUL) persists across events;
//! `retry` is taken when it is all digits; an empty line dispatches an
//! event when it has data. One event (its data and the line being read)
//! never holds more than the decoder's `max_event` bytes: past that the
//! stream ends with [`SseError::TooLarge`]. At the end of the stream an
//! event whose last line ended but whose blank line never came is still
//! dispatched (the spec drops it; a server that closes right after its
//! last `data:` line loses nothing this way).

use std::collections::VecDeque;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event` field, empty when none was given (a "message").
    pub event: String,
    /// The `data` lines joined with `\n`.
    pub data: String,
    /// The last event id seen on the stream so far (empty when none).
    pub id: String,
    /// The `retry` of this event, if it had one.
    pub retry: Option<Duration>,
}

/// Why a stream of events ended early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError<E> {
    /// One event was over the decoder's limit.
    TooLarge { max: usize },
    /// The byte stream failed.
    Transport(E),
}

impl<E: std::fmt::Display> std::fmt::Display for SseError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SseError::TooLarge { max } => write!(f, "one event was over {max} bytes"),
            SseError::Transport(e) => e.fmt(f),
        }
    }
}

/// The event one line adds to.
#[derive(Debug, Default)]
struct Pending {
    event: String,
    data: Vec<u8>,
    has_data: bool,
    retry: Option<Duration>,
}

/// The decoder's state between chunks.
#[derive(Debug)]
pub struct Decoder {
    max_event: usize,
    /// The line being read (without its end).
    line: Vec<u8>,
    /// The previous chunk ended with CR: a leading LF belongs to it.
    after_cr: bool,
    /// Bytes of the stream's start still checked for a BOM.
    bom_left: usize,
    pending: Pending,
    last_id: String,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Decoder {
    /// A decoder that refuses events over `max_event` bytes.
    pub fn new(max_event: usize) -> Decoder {
        Decoder { max_event, line: Vec::new(), after_cr: false, bom_left: BOM.len(), pending: Pending::default(), last_id: String::new() }
    }

    /// Decodes `chunk`, pushing each event it completes onto `out`;
    /// `Err(max_event)` once the event being read is over the limit.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut VecDeque<Event>) -> Result<(), usize> {
        chunk = self.skip_bom(chunk);
        if chunk.is_empty() {
            return Ok(());
        }
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while !chunk.is_empty() {
            let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) else {
                self.line.extend_from_slice(chunk);
                return self.check();
            };
            self.line.extend_from_slice(&chunk[..end]);
            self.check()?;
            let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
            if chunk[end] == b'\r' && end + 1 == chunk.len() {
                self.after_cr = true;
            }
            chunk = &chunk[end + if crlf { 2 } else { 1 }..];
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, out);
            self.line = line;
            self.line.clear();
        }
        Ok(())
    }

    /// The stream ended: the event whose lines all ended, if any.
    pub fn finish(&mut self) -> Option<Event> {
        self.line.clear();
        self.dispatch()
    }

    fn skip_bom<'a>(&mut self, chunk: &'a [u8]) -> &'a [u8] {
        if self.bom_left == 0 {
            return chunk;
        }
        let done = BOM.len() - self.bom_left;
        let take = self.bom_left.min(chunk.len());
        if chunk[..take] == BOM[done..done + take] {
            self.bom_left -= take;
            // A partial BOM is kept back; one cut short by other bytes is data.
            return &chunk[take..];
        }
        let kept = &BOM[..done];
        self.bom_left = 0;
        self.line.extend_from_slice(kept);
        chunk
    }

    /// `Err(max)` once the event being read is over the limit.
    fn check(&self) -> Result<(), usize> {
        if self.line.len() + self.pending.data.len() > self.max_event {
            return Err(self.max_event);
        }
        Ok(())
    }

    fn line_ended(&mut self, line: &[u8], out: &mut VecDeque<Event>) {
        if line.is_empty() {
            out.extend(self.dispatch());
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.pending.has_data {
                    self.pending.data.push(b'\n');
                }
                self.pending.data.extend_from_slice(value);
                self.pending.has_data = true;
            }
            b"event" => self.pending.event = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => self.last_id = String::from_utf8_lossy(value).into_owned(),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let millis = std::str::from_utf8(value).ok().and_then(|text| text.parse().ok()).unwrap_or(u64::MAX);
                self.pending.retry = Some(Duration::from_millis(millis));
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) -> Option<Event> {
        let pending = std::mem::take(&mut self.pending);
        if !pending.has_data {
            return None;
        }
        let data = String::from_utf8(pending.data).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Some(Event { event: pending.event, data, id: self.last_id.clone(), retry: pending.retry })
    }
}

/// The events of a byte stream; the first error ends it.
pub fn decode<S, B, E>(bytes: S, max_event: usize) -> BoxStream<'static, Result<Event, SseError<E>>>
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]>,
    E: Send + 'static,
{
    let state = (Box::pin(bytes), Decoder::new(max_event), VecDeque::new(), false);
    futures::stream::unfold(state, |(mut bytes, mut decoder, mut ready, mut over)| async move {
        loop {
            if let Some(event) = ready.pop_front() {
                return Some((Ok(event), (bytes, decoder, ready, over)));
            }
            if over {
                return None;
            }
            match bytes.next().await {
                Some(Ok(chunk)) => {
                    if let Err(max) = decoder.feed(chunk.as_ref(), &mut ready) {
                        ready.clear();
                        return Some((Err(SseError::TooLarge { max }), (bytes, decoder, ready, true)));
                    }
                }
                Some(Err(e)) => {
                    ready.clear();
                    return Some((Err(SseError::Transport(e)), (bytes, decoder, ready, true)));
                }
                None => {
                    over = true;
                    ready.extend(decoder.finish());
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(chunks: &[&[u8]], max: usize) -> Result<Vec<Event>, usize> {
        let mut decoder = Decoder::new(max);
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out)?;
        }
        out.extend(decoder.finish());
        Ok(out.into_iter().collect())
    }

    fn data(events: &[Event]) -> Vec<&str> {
        events.iter().map(|event| event.data.as_str()).collect()
    }

    #[test]
    fn every_line_end_is_one() {
        for stream in [&b"data: a\n\ndata: b\n\n"[..], b"data: a\r\rdata: b\r\r", b"data: a\r\n\r\ndata: b\r\n\r\n"] {
            assert_eq!(data(&all(&[stream], 100).unwrap()), ["a", "b"], "{:?}", String::from_utf8_lossy(stream));
        }
        // A CRLF cut between chunks is one line end, not two.
        assert_eq!(data(&all(&[b"data: a\r", b"\ndata: b\r\n\r\n"], 100).unwrap()), ["a\nb"]);
    }

    #[test]
    fn fields_follow_the_spec() {
        let stream =
            b"\xEF\xBB\xBF: comment\nevent: endpoint\ndata\ndata:x\ndata:  y\nid: 7\nretry: 1500\nretry: 2s\nother: z\n\ndata: next\n\n";
        let events = all(&[stream], 100).unwrap();
        assert_eq!(
            events[0],
            Event { event: "endpoint".into(), data: "\nx\n y".into(), id: "7".into(), retry: Some(Duration::from_millis(1500)) }
        );
        assert_eq!(events[1], Event { event: String::new(), data: "next".into(), id: "7".into(), retry: None }, "ids persist");
        assert!(all(&[b"event: e\nid: 1\n\n"], 100).unwrap().is_empty(), "no data, no event");
        assert_eq!(all(&[b"id: a\0b\ndata: d\n\n"], 100).unwrap()[0].id, "", "an id with NUL is ignored");
    }

    #[test]
    fn a_bom_split_across_chunks_is_dropped_and_a_false_start_kept() {
        assert_eq!(data(&all(&[b"\xEF", b"\xBB\xBFdata: a\n\n"], 100).unwrap()), ["a"]);
        let events = all(&[b"\xEFdata: a\n\n"], 100).unwrap();
        assert!(events.is_empty(), "the line starts with a stray byte, so it is no data field: {events:?}");
    }

    #[test]
    fn the_last_event_is_kept_when_its_blank_line_never_comes() {
        assert_eq!(data(&all(&[b"data: a\n\ndata: b\n"], 100).unwrap()), ["a", "b"]);
        assert!(all(&[b"data: a\n\ndata: b"], 100).unwrap().len() == 1, "an unfinished line is not dispatched");
    }

    #[test]
    fn an_event_over_the_limit_is_refused_as_its_bytes_arrive() {
        assert_eq!(all(&[b"data: 0123456789\n"], 8), Err(8));
        assert_eq!(all(&[b"data: 0123", b"4567", b"89"], 8), Err(8), "a line that never ends is refused early");
        assert_eq!(all(&[b"data: 0123\n", b"data: 4567\n"], 12), Err(12), "data lines of one event add up");
        assert_eq!(data(&all(&[b"data: 0123\n\n", b"data: 4567\n\n"], 12).unwrap()), ["0123", "4567"], "events do not");
    }

    #[test]
    fn a_long_line_in_small_chunks_costs_linear_time() {
        // 8 MiB in 1 KiB chunks: a decoder that re-scans its buffer per chunk
        // does 8,192 scans of up to 8 MiB (about 34 G byte visits) and does not
        // finish within a test's patience; this one visits each byte once.
        let chunk = vec![b'x'; 1024];
        let mut decoder = Decoder::new(16 << 20);
        let mut out = VecDeque::new();
        decoder.feed(b"data: ", &mut out).unwrap();
        for _ in 0..8192 {
            decoder.feed(&chunk, &mut out).unwrap();
        }
        decoder.feed(b"\n\n", &mut out).unwrap();
        assert_eq!(out.pop_front().map(|event| event.data.len()), Some(8 << 20));
    }

    #[tokio::test]
    async fn a_stream_ends_at_its_first_error() {
        let chunks: Vec<Result<&[u8], &str>> = vec![Ok(b"data: a\n\ndata: b"), Err("reset"), Ok(b"\n\n")];
        let events: Vec<_> = decode(futures::stream::iter(chunks), 100).collect().await;
        assert_eq!(events, vec![Ok(Event { data: "a".into(), ..Event::default() }), Err(SseError::Transport("reset"))]);
    }

    const PARTS: [&[u8]; 12] = [
        b"data: ",
        b"data:x",
        b"\r",
        b"\n",
        b"\r\n",
        b"id: 3",
        b":c",
        b"event: e",
        b"retry: 9",
        b"\xEF\xBB\xBF",
        b"\xC3\xA9",
        b"{\"a\":1}",
    ];

    proptest! {
        #[test]
        fn chunking_never_changes_the_events(stream in proptest::collection::vec(proptest::sample::select(PARTS.to_vec()), 0..40)
            .prop_map(|parts| parts.concat()), cuts in proptest::collection::vec(0usize..400, 0..12)) {
            let whole = all(&[&stream], 1 << 20).unwrap();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(stream.len())).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                pieces.push(&stream[from..cut]);
                from = cut;
            }
            prop_assert_eq!(all(&pieces, 1 << 20).unwrap(), whole);
        }
    }
}
