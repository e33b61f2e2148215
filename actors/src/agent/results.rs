//! What the model is told about a tool call: the server's result turned
//! into message parts, errors turned into readable results, long output cut.
//!
//! Text, images and embedded text resources go to the model as they are;
//! audio, binary resources and resource links are described in a line of
//! text (no provider takes them inside a tool result). A result with no
//! content but `structuredContent` is given as its JSON. Text beyond
//! `max_chars` (all text parts together) is cut at a character boundary,
//! with a note saying how much was cut, so the model knows it saw a part.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::llm::Part;

/// The parts the model gets for a result, and whether it is an error.
pub fn parts_of_result(result: &CallToolResult, max_chars: usize) -> (Vec<Part>, bool) {
    let mut parts: Vec<Part> = result.content.iter().map(part_of).collect();
    if parts.is_empty() {
        let text = match &result.structured_content {
            Some(structured) => structured.to_string(),
            None => "(the tool returned no content)".to_string(),
        };
        parts.push(Part::Text { text });
    }
    (cut(parts, max_chars), result.is_error == Some(true))
}

/// One line of text: what happened, for the model and for display.
pub fn error_parts(message: String) -> Vec<Part> {
    vec![Part::Text { text: message }]
}

/// The text of `parts`, images as a short mark; what events and logs show.
pub fn plain_text(parts: &[Part]) -> String {
    let pieces: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.clone(),
            Part::Image { mime_type, data } => format!("[image {mime_type}, {} bytes base64]", data.len()),
        })
        .collect();
    pieces.join("\n")
}

fn part_of(block: &ContentBlock) -> Part {
    let text = |text: String| Part::Text { text };
    match block {
        ContentBlock::Text(content) => text(content.text.clone()),
        ContentBlock::Image(image) => Part::Image { mime_type: image.mime_type.clone(), data: image.data.clone() },
        ContentBlock::Audio(audio) => text(format!("[audio {} of {} bytes base64, not shown]", audio.mime_type, audio.data.len())),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text: body, .. } => text(format!("[resource {uri}]\n{body}")),
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => text(format!(
                "[binary resource {uri} ({}) of {} bytes base64, not shown]",
                mime_type.as_deref().unwrap_or("unknown type"),
                blob.len()
            )),
            other => {
                text(format!("[a resource of a kind this client does not know: {}]", serde_json::to_string(other).unwrap_or_default()))
            }
        },
        ContentBlock::ResourceLink(link) => text(format!("[resource link {} ({})]", link.uri, link.name)),
        other => text(format!("[content of a kind this client does not know: {}]", serde_json::to_string(other).unwrap_or_default())),
    }
}

/// Cuts the text of `parts` to `max_chars` characters in all.
pub fn cut(parts: Vec<Part>, max_chars: usize) -> Vec<Part> {
    let total: usize = parts.iter().filter_map(Part::text).map(|text| text.chars().count()).sum();
    if total <= max_chars {
        return parts;
    }
    let mut left = max_chars;
    let mut kept = Vec::with_capacity(parts.len() + 1);
    for part in parts {
        match part {
            Part::Text { text } if left == 0 => drop(text),
            Part::Text { text } => {
                let end = text.char_indices().nth(left).map_or(text.len(), |(at, _)| at);
                left -= text[..end].chars().count();
                kept.push(Part::Text { text: text[..end].to_string() });
            }
            image => kept.push(image),
        }
    }
    kept.push(Part::Text {
        text: format!("[output cut: the tool returned {total} characters; only the first {max_chars} are shown. Ask for less (a range, a filter) to see the rest]"),
    });
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::CallToolResult;

    #[test]
    fn long_text_is_cut_with_a_note_and_images_kept() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("é".repeat(30)), ContentBlock::image("AAAA", "image/png")]);
        result.content.push(ContentBlock::text("tail"));
        let (parts, is_error) = parts_of_result(&result, 10);
        assert!(!is_error);
        assert_eq!(parts[0], Part::Text { text: "é".repeat(10) });
        assert!(matches!(parts[1], Part::Image { .. }));
        let note = parts.last().and_then(Part::text).unwrap();
        assert!(note.contains("34 characters") && note.contains("first 10"), "{note}");
        assert_eq!(parts.len(), 3, "the text past the limit is dropped");
    }

    #[test]
    fn structured_only_results_and_errors_are_readable() {
        let mut result = CallToolResult::structured(serde_json::json!({"n": 1}));
        result.content.clear();
        let (parts, _) = parts_of_result(&result, 100);
        assert_eq!(plain_text(&parts), "{\"n\":1}");
        let error = CallToolResult::error(vec![ContentBlock::text("no such file")]);
        assert!(parts_of_result(&error, 100).1);
    }
}
