//! A `session/prompt`'s content as the model's [`Part`]s: text as is,
//! images as images, embedded resources (the editor's context: a file, a
//! selection) as text marked with their URI, resource links as a line
//! naming the URI for the tools to read. Audio, which no provider here
//! takes, becomes a line saying it was left out.

use agent_client_protocol_schema::{ContentBlock, EmbeddedResourceResource};

use crate::llm::Part;

pub fn parts(blocks: Vec<ContentBlock>) -> Vec<Part> {
    blocks.into_iter().map(part).collect()
}

fn part(block: ContentBlock) -> Part {
    let text = match block {
        ContentBlock::Text(text) => text.text,
        ContentBlock::Image(image) => return Part::Image { mime_type: image.mime_type, data: image.data },
        ContentBlock::ResourceLink(link) => format!("[the user refers to {} ({})]", link.uri, link.name),
        ContentBlock::Resource(embedded) => match embedded.resource {
            EmbeddedResourceResource::TextResourceContents(resource) => {
                format!("<context uri=\"{}\">\n{}\n</context>", resource.uri, resource.text)
            }
            EmbeddedResourceResource::BlobResourceContents(resource) => {
                format!("[a binary attachment {} ({}) was left out]", resource.uri, resource.mime_type.as_deref().unwrap_or("unknown type"))
            }
            _ => "[an attachment of a kind this agent does not read was left out]".into(),
        },
        ContentBlock::Audio(_) => "[an audio clip was left out: the model takes text and images]".into(),
        _ => "[content of a kind this agent does not read was left out]".into(),
    };
    Part::Text { text }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::{EmbeddedResource, ImageContent, ResourceLink, TextResourceContents};

    #[test]
    fn each_kind_of_block_reaches_the_model() {
        let blocks = vec![
            ContentBlock::from("look"),
            ContentBlock::Image(ImageContent::new("AAAA", "image/png")),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///p/main.rs")),
            ContentBlock::Resource(EmbeddedResource::new(EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                "fn main() {}",
                "file:///p/main.rs",
            )))),
        ];
        let parts = parts(blocks);
        assert_eq!(parts[0], Part::Text { text: "look".into() });
        assert_eq!(parts[1], Part::Image { mime_type: "image/png".into(), data: "AAAA".into() });
        assert!(parts[2].text().unwrap().contains("file:///p/main.rs"));
        assert_eq!(parts[3].text().unwrap(), "<context uri=\"file:///p/main.rs\">\nfn main() {}\n</context>");
    }
}
