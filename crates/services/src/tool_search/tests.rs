use super::*;
use rmcp::model::Tool;

/// A catalog shaped like a real setup: the reference servers and popular
/// ones (filesystem, git, GitHub, GitLab, Slack, Postgres, memory, fetch,
/// a browser, time), with their own names and descriptions.
const CATALOG: &[(&str, &str, &str)] = &[
    ("filesystem", "read_file", "Read the complete contents of a file from the file system. Handles various text encodings."),
    ("filesystem", "read_text_file", "Read the complete contents of a file from the file system as text."),
    ("filesystem", "read_media_file", "Read an image or audio file. Returns the base64 encoded data and MIME type."),
    ("filesystem", "read_multiple_files", "Read the contents of multiple files simultaneously."),
    ("filesystem", "write_file", "Create a new file or completely overwrite an existing file with new content."),
    ("filesystem", "edit_file", "Make line-based edits to a text file. Each edit replaces exact line sequences with new content."),
    ("filesystem", "create_directory", "Create a new directory or ensure a directory exists."),
    ("filesystem", "list_directory", "Get a detailed listing of all files and directories in a specified path."),
    (
        "filesystem",
        "list_directory_with_sizes",
        "Get a detailed listing of all files and directories in a specified path, including sizes.",
    ),
    ("filesystem", "directory_tree", "Get a recursive tree view of files and directories as a JSON structure."),
    ("filesystem", "move_file", "Move or rename files and directories."),
    ("filesystem", "search_files", "Recursively search for files and directories matching a pattern."),
    ("filesystem", "get_file_info", "Retrieve detailed metadata about a file or directory: size, creation time, permissions."),
    ("filesystem", "list_allowed_directories", "Returns the list of directories that this server is allowed to access."),
    ("git", "git_status", "Shows the working tree status"),
    ("git", "git_diff_unstaged", "Shows changes in the working directory that are not yet staged"),
    ("git", "git_diff_staged", "Shows changes that are staged for commit"),
    ("git", "git_diff", "Shows differences between branches or commits"),
    ("git", "git_commit", "Records changes to the repository"),
    ("git", "git_add", "Adds file contents to the staging area"),
    ("git", "git_reset", "Unstages all staged changes"),
    ("git", "git_log", "Shows the commit logs"),
    ("git", "git_create_branch", "Creates a new branch from an optional base branch"),
    ("git", "git_checkout", "Switches branches"),
    ("git", "git_show", "Shows the contents of a commit"),
    ("git", "git_branch", "List Git branches"),
    ("github", "create_issue", "Create a new issue in a GitHub repository"),
    ("github", "get_issue", "Get details of a specific issue in a GitHub repository."),
    ("github", "list_issues", "List issues in a GitHub repository with filtering options"),
    ("github", "update_issue", "Update an existing issue in a GitHub repository"),
    ("github", "add_issue_comment", "Add a comment to an existing issue"),
    ("github", "search_issues", "Search for issues and pull requests across GitHub repositories"),
    ("github", "create_pull_request", "Create a new pull request in a GitHub repository"),
    ("github", "get_pull_request", "Get details of a specific pull request"),
    ("github", "list_pull_requests", "List and filter repository pull requests"),
    ("github", "merge_pull_request", "Merge a pull request"),
    ("github", "create_repository", "Create a new GitHub repository in your account"),
    ("github", "search_repositories", "Search for GitHub repositories"),
    ("github", "fork_repository", "Fork a GitHub repository to your account or specified organization"),
    ("github", "create_branch", "Create a new branch in a GitHub repository"),
    ("github", "get_file_contents", "Get the contents of a file or directory from a GitHub repository"),
    ("github", "create_or_update_file", "Create or update a single file in a GitHub repository"),
    ("github", "push_files", "Push multiple files to a GitHub repository in a single commit"),
    ("github", "list_commits", "Get list of commits of a branch in a GitHub repository"),
    ("github", "search_code", "Search for code across GitHub repositories"),
    ("github", "search_users", "Search for users on GitHub"),
    ("gitlab", "create_issue", "Create a new issue in a GitLab project"),
    ("gitlab", "list_issues", "List issues in a GitLab project"),
    ("gitlab", "create_merge_request", "Create a new merge request in a GitLab project"),
    ("gitlab", "get_file_contents", "Get the contents of a file or directory from a GitLab project"),
    ("slack", "slack_list_channels", "List public channels in the workspace with pagination"),
    ("slack", "slack_post_message", "Post a new message to a Slack channel"),
    ("slack", "slack_reply_to_thread", "Reply to a specific message thread in Slack"),
    ("slack", "slack_add_reaction", "Add a reaction emoji to a message"),
    ("slack", "slack_get_channel_history", "Get recent messages from a channel"),
    ("slack", "slack_get_users", "Get a list of all users in the workspace with their basic profile information"),
    ("postgres", "query", "Run a read-only SQL query"),
    ("memory", "create_entities", "Create multiple new entities in the knowledge graph"),
    ("memory", "create_relations", "Create multiple new relations between entities in the knowledge graph"),
    ("memory", "add_observations", "Add new observations to existing entities in the knowledge graph"),
    ("memory", "delete_entities", "Delete multiple entities and their associated relations from the knowledge graph"),
    ("memory", "read_graph", "Read the entire knowledge graph"),
    ("memory", "search_nodes", "Search for nodes in the knowledge graph based on a query"),
    ("fetch", "fetch", "Fetches a URL from the internet and optionally extracts its contents as markdown."),
    ("browser", "browserNavigate", "Navigate to a URL"),
    ("browser", "browserTakeScreenshot", "Take a screenshot of the current page or a specific element"),
    ("browser", "browserClick", "Click an element on the page"),
    ("browser", "browserFillForm", "Fill out an input field"),
    ("time", "get_current_time", "Get current time in a specific timezones"),
    ("time", "convert_time", "Convert time between timezones"),
];

fn catalog() -> Vec<ToolEntry> {
    CATALOG
        .iter()
        .map(|(server, name, description)| ToolEntry {
            name: crate::naming::exposed_name(server, name),
            server: server.to_string(),
            tool: Tool::new(name.to_string(), description.to_string(), rmcp::model::JsonObject::new()),
        })
        .collect()
}

/// The first `n` results as `server/tool`.
fn top(query: &str, n: usize) -> Vec<String> {
    let catalog = catalog();
    search(query, &catalog, n).iter().map(|entry| format!("{}/{}", entry.server, entry.tool.name)).collect()
}

#[test]
fn the_catalog_is_realistically_large() {
    assert!(CATALOG.len() >= 50, "{}", CATALOG.len());
}

#[test]
fn reading_a_file_finds_the_file_readers_plainest_first() {
    let found = top("read a file", 4);
    assert_eq!(found[0], "filesystem/read_file", "{found:?}");
    assert!(found[1..].iter().all(|name| name.starts_with("filesystem/read_")), "{found:?}");
}

#[test]
fn a_server_name_and_a_word_find_that_servers_tools() {
    let found = top("github issue", 6);
    assert_eq!(found.len(), 6);
    assert!(found.iter().all(|name| name.starts_with("github/") && name.contains("issue")), "{found:?}");
}

#[test]
fn an_exact_name_comes_first_whatever_its_spelling() {
    for query in ["create_issue", "Create Issue", "createIssue", "mcp__gitlab__create_issue"] {
        let found = top(query, 3);
        let expected = if query.starts_with("mcp__") { "gitlab/create_issue" } else { "github/create_issue" };
        assert_eq!(found[0], expected, "{query}: {found:?}");
        if !query.starts_with("mcp__") {
            assert_eq!(found[1], "gitlab/create_issue", "the other exact match, ordered by exposed name: {found:?}");
        }
    }
}

#[test]
fn camel_case_names_are_cut_into_words() {
    assert_eq!(top("take screenshot", 1), ["browser/browserTakeScreenshot"]);
    assert_eq!(
        words("HTTPServer v2Beta snake_case kebab-case dotted.name"),
        ["http", "server", "v2", "beta", "snake", "case", "kebab", "case", "dotted", "name"]
    );
}

#[test]
fn plurals_and_verb_forms_meet() {
    for (a, b) in [("files", "file"), ("issues", "issue"), ("created", "create"), ("creating", "creates"), ("directories", "directory")] {
        assert_eq!(stem(a), stem(b), "{a} / {b}");
    }
    assert_eq!(top("listing directories", 1), ["filesystem/list_directory"]);
}

#[test]
fn descriptions_count_for_less_than_names() {
    let found = top("commit", 3);
    assert_eq!(found[0], "git/git_commit", "{found:?}");
    let found = top("send a message to a slack channel", 2);
    assert_eq!(found[0], "slack/slack_post_message", "{found:?}");
}

#[test]
fn partial_words_match_at_a_words_start_or_inside_it() {
    let found = top("screensh", 1);
    assert_eq!(found, ["browser/browserTakeScreenshot"]);
    let found = top("timezone", 2);
    assert!(found.contains(&"time/convert_time".to_string()), "{found:?}");
    assert!(top("zz", 5).is_empty(), "short pieces match whole words only");
}

#[test]
fn synonyms_match_for_a_little_less() {
    assert_eq!(top("remove entities", 1), ["memory/delete_entities"]);
    assert_eq!(top("make a folder", 1), ["filesystem/create_directory"]);
    assert_eq!(top("open a web page", 1), ["browser/browserNavigate"]);
    assert_eq!(top("list files in a folder", 1), ["filesystem/list_directory"]);
}

#[test]
fn ties_are_ordered_by_exposed_name_and_the_limit_is_kept() {
    let catalog = catalog();
    let first = search("graph", &catalog, 100);
    let names: Vec<&str> = first.iter().map(|entry| entry.name.as_str()).collect();
    assert!(names.len() >= 5, "{names:?}");
    assert_eq!(search("graph", &catalog, 100).iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), names, "deterministic");
    assert_eq!(search("graph", &catalog, 2).len(), 2);
    assert_eq!(names[0], "mcp__memory__read_graph", "the only name with `graph` in it");
    let rest = &names[1..];
    let mut sorted = rest.to_vec();
    sorted.sort();
    assert_eq!(rest, sorted, "equal scores: by exposed name");
}

#[test]
fn words_nothing_matches_find_nothing_and_an_empty_query_lists_in_order() {
    assert!(top("kubernetes pods", 10).is_empty());
    let catalog = catalog();
    let listed: Vec<&str> = search("  ", &catalog, 3).iter().map(|e| e.tool.name.as_ref()).collect();
    assert_eq!(listed, ["read_file", "read_text_file", "read_media_file"]);
    let found = top("the", 100);
    assert!(found.contains(&"filesystem/read_file".to_string()), "a query of stop words only searches for them: {found:?}");
}
