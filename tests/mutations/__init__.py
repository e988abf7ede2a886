"""The mutation suite: code mutations of mechanisms and instruments, judged by the ledger."""
