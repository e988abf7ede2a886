"""Infrastructure: processes (local or over SSH), Redis servers and the local cluster,
inventories and targets, host facts and identities, the load tools, monitoring and the
serving engine. Imports only harness.base.
"""
