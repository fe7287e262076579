// CUDA's dim3, uint3 and vector types (float4, double2, ...) with their make_* functions, for g++.
#pragma once

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return {x, y, z}; }
};

// Alignments as on the GPU: a float4 is one 16-byte load there, and code relies on it.
#define EMU_VECTOR2(name, T, align)                                            \
  struct alignas(align) name {                                                 \
    T x, y;                                                                    \
  };                                                                           \
  inline constexpr name make_##name(T x, T y) { return name{x, y}; }
#define EMU_VECTOR4(name, T, align)                                            \
  struct alignas(align) name {                                                 \
    T x, y, z, w;                                                              \
  };                                                                           \
  inline constexpr name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

EMU_VECTOR2(float2, float, 8)
EMU_VECTOR4(float4, float, 16)
EMU_VECTOR2(double2, double, 16)
EMU_VECTOR4(double4, double, 32)
EMU_VECTOR2(int2, int, 8)
EMU_VECTOR4(int4, int, 16)
EMU_VECTOR2(uint2, unsigned, 8)
EMU_VECTOR4(uint4, unsigned, 16)
EMU_VECTOR2(longlong2, long long, 16)
EMU_VECTOR2(ulonglong2, unsigned long long, 16)
EMU_VECTOR4(uchar4, unsigned char, 4)
EMU_VECTOR4(char4, signed char, 4)
#undef EMU_VECTOR2
#undef EMU_VECTOR4

inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return uint3{x, y, z}; }
