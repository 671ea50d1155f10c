"""What a cycle leaves behind: its report, the transcript, and once it is saved, aftercare, the hook, metrics."""
