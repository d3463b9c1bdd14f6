"""MQTT transport of the startd: command messages, authorization, the broker connection, the embedded
broker and the address file: the wire. The client commands that use it live in :mod:`startd.tools`.

The pieces, bottom up:

- :mod:`.messages`: the commands and replies (pydantic), parsing, conversion to and from the engine
- :mod:`.authz`: HTCondor's authorization levels by MQTT user
- :mod:`.dispatch`: parse, authorize, de-duplicate by request_id, execute
- :mod:`.settings`: broker URLs, credentials and TLS from knobs, the topics
- :mod:`.client`: the daemon's connection (reconnecting, retained ads) and a client's session
- :mod:`.broker`: the embedded amqtt broker
- :mod:`.address`: the address file and the client rule for finding the broker
- :mod:`.queue`: the bounded command queue and the publication backlog
"""
