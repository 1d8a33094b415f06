"""The Codex CLI tests need bubblewrap's sandbox like every agent command."""
