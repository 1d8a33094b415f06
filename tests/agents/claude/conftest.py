"""The Claude Code tests need bubblewrap's sandbox like every agent command."""
