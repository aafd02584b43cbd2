"""How ranks are started: re-executing the command per rank, or spawning from this process."""
