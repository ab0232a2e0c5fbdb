//! Mermaid flowchart of a thought tree. (Being written.)
use crate::projection::tree::ThoughtTree;

pub fn render(tree: &ThoughtTree) -> String {
    let _ = tree;
    String::from("flowchart TD\n")
}
