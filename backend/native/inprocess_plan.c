/* litecl's in-process runtime: no exported plan (backend/runtime.py inprocess_plan_c) */
#include "litecl_plan.h"
static const int32_t SIZES[22] = {0, 4, 4, 1, 8, 0, 1, 2, 8, 1, 2, 8, 0, 0, 0, 0, 4, 2, 1, 2, 1, 1};
const char *const LCL_TYPE_NAMES[22] = {"", "float32", "int32", "uint8", "int64", "", "bool", "int16", "complex64", "int8", "float16", "float64", "", "", "", "", "uint32", "uint16", "int4", "bfloat16", "int2", "uint4"};
static const int32_t PACKED[9] = {18, 4, 1, 21, 4, 0, 20, 2, 1};
#define LCL_N_PACKED 3
#define LCL_N_SIZES 22
const char *const LCL_OP_NAMES[1] = {""};
const int32_t LCL_N_OP_NAMES = 0;
const int32_t LCL_INTS[1] = {0};
const lcl_program LCL_PROGRAMS[1] = {{"", "", 0, NULL, 0}};
const lcl_launch LCL_LAUNCHES[1] = {{0, 1, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, {0, 0}, -1}};
const lcl_partition LCL_PARTITIONS[1] = {{{0, 0}, 0, 0}};
const lcl_family LCL_FAMILIES[1] = {{"", 0, 0, 1, {0, 0}, 0, {NULL, NULL}, {0, 0}, {NULL, NULL}, 0, 0}};
const lcl_subgraph LCL_SUBGRAPHS[1] = {{{0, 0}, {0, 0}, 0, 0, 0, 0}};
const lcl_plan_info LCL_PLAN = {
    "", "", "", "", "", "", 1, 64, 1, 1, 0, 0, 1, 1, 0, 0,
    PACKED, LCL_N_PACKED, SIZES, LCL_N_SIZES, 0, NULL, 0,
    0, 0, 0, 1, 0.0, 0, "", NULL, 0, NULL
};
