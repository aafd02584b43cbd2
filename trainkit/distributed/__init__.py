"""Process groups: who launched us (env), starting ranks (launcher), collectives (comm)."""
