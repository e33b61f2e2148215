//! The stdio framing: arbitrary bytes, cut into arbitrary chunks, through
//! `JsonRpcCodec` with a small `max_frame`.
//!
//! Properties: never panics; every line (newline-terminated, or the last
//! bytes at EOF) yields exactly one item, a message or a `FrameError`, so
//! nothing is lost or invented; where the input is cut does not change the
//! items; the buffer never holds more than `max_frame` plus one chunk.
#![no_main]

use arbitrary::Arbitrary;
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpvisor_wire::codec::{Frame, JsonRpcCodec};
use tokio_util::codec::Decoder;

#[derive(Arbitrary, Debug)]
struct Input {
    max_frame: u8,
    cuts: Vec<u8>,
    data: Vec<u8>,
}

fn describe(frame: Frame) -> String {
    match frame {
        Ok(message) => format!("{message:?}"),
        Err(error) => format!("{error:?}"),
    }
}

/// Every item of `data` fed in chunks of the given sizes, then EOF.
fn decode(max_frame: usize, data: &[u8], cuts: &[u8]) -> Vec<String> {
    let mut codec = JsonRpcCodec::new(max_frame);
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    let mut rest = data;
    let mut sizes = cuts.iter().map(|&c| usize::from(c) + 1).chain(std::iter::repeat(usize::MAX));
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(usize::MAX).min(rest.len());
        buf.extend_from_slice(&rest[..size]);
        rest = &rest[size..];
        while let Some(frame) = codec.decode(&mut buf).expect("decoding never fails on content") {
            items.push(describe(frame));
        }
        assert!(buf.len() <= max_frame + size, "the decoder holds {} bytes with max_frame {max_frame}", buf.len());
    }
    while let Some(frame) = codec.decode_eof(&mut buf).expect("decoding never fails on content") {
        items.push(describe(frame));
    }
    items
}

fuzz_target!(|input: Input| {
    let max_frame = usize::from(input.max_frame % 64) + 1;
    let items = decode(max_frame, &input.data, &input.cuts);
    let lines = input.data.iter().filter(|&&b| b == b'\n').count();
    let unterminated = usize::from(input.data.last().is_some_and(|&b| b != b'\n'));
    assert_eq!(items.len(), lines + unterminated, "one item per line: {items:?}");
    let whole = decode(max_frame, &input.data, &[]);
    assert_eq!(items, whole, "the items depend on where the input was cut");
});
