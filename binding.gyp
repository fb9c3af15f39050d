{
  "variables": {
    "has_fuse3%": "<!(pkg-config --exists fuse3 && echo 1 || echo 0)"
  },
  "targets": [
    {
      "target_name": "talon_sendfile",
      "sources": ["native/sendfile.c", "native/hits.c", "native/listen.c", "native/memory.c", "native/xxh64.c", "native/xxh3.c"],
      "conditions": [
        ["OS!='linux'", { "type": "none", "sources!": ["native/sendfile.c", "native/hits.c", "native/listen.c", "native/memory.c", "native/xxh64.c", "native/xxh3.c"] }]
      ],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "talon_splice",
      "sources": ["native/splice.c"],
      "conditions": [
        ["OS!='linux'", { "type": "none", "sources!": ["native/splice.c"] }]
      ],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "defines": ["NAPI_VERSION=8"]
    },
    {
      "target_name": "talon_fill",
      "sources": ["native/fill.c", "native/xxh64.c"],
      "conditions": [
        ["OS!='linux'", { "type": "none", "sources!": ["native/fill.c", "native/xxh64.c"] }]
      ],
      "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-pthread"],
      "libraries": ["-lpthread"],
      "defines": ["NAPI_VERSION=8"]
    }
  ],
  "conditions": [
    ["OS=='linux' and has_fuse3==1", {
      "targets": [
        {
          "target_name": "talon_fuse",
          "sources": ["native/fuse.c", "native/fuse_reply.c"],
          "cflags": ["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "<!@(pkg-config --cflags fuse3)"],
          "libraries": ["<!@(pkg-config --libs fuse3)"],
          "defines": ["NAPI_VERSION=8"]
        }
      ]
    }]
  ]
}
