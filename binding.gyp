{
  "targets": [
    {
      "target_name": "talon_sendfile",
      "sources": ["native/sendfile.c", "native/hits.c"],
      "conditions": [
        ["OS!='linux'", { "type": "none", "sources!": ["native/sendfile.c", "native/hits.c"] }]
      ],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
