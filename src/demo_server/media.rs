//! Binary payloads: base64, a 1×1 PNG, a tiny WAV, and the `media` tool's
//! answer with one content item of each type.

use serde_json::{json, Value};

/// A valid 1×1 RGBA PNG (signature, IHDR, IDAT and IEND with correct CRCs).
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// Standard base64 (RFC 4648, with padding).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = byte(0) << 16 | byte(1) << 8 | byte(2);
        for i in 0..4 {
            // A chunk of k bytes yields k + 1 characters, then padding.
            out.push(if i <= chunk.len() { char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]) } else { '=' });
        }
    }
    out
}

/// A mono 8-bit 8 kHz WAV of 8 samples: a 44-byte RIFF header, then the data.
pub fn wav_bytes() -> Vec<u8> {
    let samples = [128u8, 176, 218, 245, 255, 245, 218, 176];
    let data_len = samples.len() as u32;
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // channels
    wav.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

/// The `media` tool's answer.
pub fn media_result() -> Value {
    json!({"content": [
        {"type": "text", "text": "one of each content type"},
        {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
        {"type": "audio", "data": base64(&wav_bytes()), "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": super::resources::COUNTER_URI, "name": "counter", "mimeType": "text/plain"},
        {"type": "resource", "resource": {"uri": "demo://item/1", "mimeType": "text/plain", "text": "item 1"}},
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        let vectors =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }

    #[test]
    fn the_wav_header_is_consistent() {
        let wav = wav_bytes();
        assert_eq!((&wav[0..4], &wav[8..16], &wav[36..40]), (&b"RIFF"[..], &b"WAVEfmt "[..], &b"data"[..]));
        assert_eq!(u32::from_le_bytes([wav[4], wav[5], wav[6], wav[7]]) as usize, wav.len() - 8);
        assert_eq!(u32::from_le_bytes([wav[40], wav[41], wav[42], wav[43]]) as usize, wav.len() - 44);
    }

    #[test]
    fn media_has_one_item_of_each_type() {
        let result = media_result();
        let types: Vec<&str> = result["content"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["text", "image", "audio", "resource_link", "resource"]);
        assert!(result["content"][2]["data"].as_str().unwrap().starts_with("UklGR"));
        // "RIFF"
    }
}
