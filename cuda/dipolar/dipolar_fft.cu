/*
 * dipolar_fft.cu -- the dipolar term of the CUDA dipolar GPE solver
 * (Loncar, thesis, eq. 2.37 and section 2.3: the dipolar potential as the
 * convolution of |Psi|^2 with the dipolar kernel, evaluated in Fourier
 * space): cuFFT R2C / C2R plans made once per solver, in place on a buffer
 * padded to 2 (n/2 + 1) on the contiguous axis; the density and Simpson
 * norm of a state (k_prepare); R2C -> multiply by the kernel table (which
 * carries the 1/N of the inverse) -> C2R.
 */
#include "dipolar/dipolar.cuh"

int dipolar_fft_check(cufftResult r, const char *what)
{
    if (r == CUFFT_SUCCESS)
        return NLSE_OK;
    return nlse_fail(NLSE_ERR_BACKEND, "cuFFT error %d in %s%s", (int)r, what,
                     r == CUFFT_ALLOC_FAILED ? " (out of device memory)" : "");
}

/* Density (optional) and Simpson norm parts of the current state. */
template <typename T, typename V>
__global__ void __launch_bounds__(BLK) k_prepare(const V *psi, Grid<T> G, Dens<T> out)
{
    __shared__ double red[BLK / 32];
    const long long rows = (long long)G.n0 * G.n1;
    double nsum = 0;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const int i = (int)(row / G.n1), j = (int)(row % G.n1);
        double ls = 0;
        for (int k = threadIdx.x; k < G.n2; k += blockDim.x) {
            T d = abs2(psi[row * G.n2 + k]);
            if (out.dens)
                out.dens[row * G.nlp + k] = d;
            ls += G.w2[k] * (double)d;
        }
        nsum += ls * G.w0[i] * G.w1[j];
    }
    write_partial(nsum, red, out);
}

/* spectrum *= kernel (the kernel holds the 1/N) */
template <typename T>
__global__ void k_kmul(typename Vec2<T>::T *d, const T *K, long long nk)
{
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < nk;
         q += (long long)gridDim.x * blockDim.x) {
        typename Vec2<T>::T v = d[q];
        const T k = K[q];
        v.x *= k;
        v.y *= k;
        d[q] = v;
    }
}

/* ------------------------------------------------------------------ */
/* host side                                                          */
/* ------------------------------------------------------------------ */

static size_t fft_rsize(const nlse_dipolar *s) { return s->rs; }

static int make_plans(nlse_dipolar *s)
{
    const int dbl = s->p.dtype == NLSE_COMPLEX128;
    const int n0 = (int)s->L.n[0], n1 = (int)s->L.n[1], n2 = (int)s->L.n[2];
    cufftType tf = dbl ? CUFFT_D2Z : CUFFT_R2C, tb = dbl ? CUFFT_Z2D : CUFFT_C2R;
    size_t wf = 0, wb = 0;
    CKS(dipolar_fft_check(cufftCreate(&s->pf), "cufftCreate"));
    CKS(dipolar_fft_check(cufftCreate(&s->pb), "cufftCreate"));
    s->have_plans = 1;
    if (s->L.ndim == 3) {
        CKS(dipolar_fft_check(cufftMakePlan3d(s->pf, n0, n1, n2, tf, &wf), "cufftMakePlan3d"));
        CKS(dipolar_fft_check(cufftMakePlan3d(s->pb, n0, n1, n2, tb, &wb), "cufftMakePlan3d"));
    } else if (s->L.ndim == 2) {
        CKS(dipolar_fft_check(cufftMakePlan2d(s->pf, n1, n2, tf, &wf), "cufftMakePlan2d"));
        CKS(dipolar_fft_check(cufftMakePlan2d(s->pb, n1, n2, tb, &wb), "cufftMakePlan2d"));
    } else {
        CKS(dipolar_fft_check(cufftMakePlan1d(s->pf, n2, tf, 1, &wf), "cufftMakePlan1d"));
        CKS(dipolar_fft_check(cufftMakePlan1d(s->pb, n2, tb, 1, &wb), "cufftMakePlan1d"));
    }
    CKS(dipolar_fft_check(cufftSetStream(s->pf, s->stream), "cufftSetStream"));
    CKS(dipolar_fft_check(cufftSetStream(s->pb, s->stream), "cufftSetStream"));
    s->fft_work = wf + wb;
    s->dev_bytes += s->fft_work;
    return NLSE_OK;
}

int dipolar_enable_dipolar(nlse_dipolar *s)
{
    if (s->have_plans)
        return NLSE_OK;
    CKS(dipolar_check_dipolar(&s->p));
    const size_t rs = fft_rsize(s);
    CKS(dmalloc(s, &s->dens, s->L.n[0] * s->L.n[1] * s->nlp * rs, "the density / FFT buffer"));
    CKS(dmalloc(s, &s->kern, s->nk * rs, "the dipolar kernel"));
    CK(cudaMemsetAsync(s->dens, 0, s->L.n[0] * s->L.n[1] * s->nlp * rs, s->stream));
    CKS(make_plans(s));
    /* kernel table with the 1/N of the inverse transform */
    double *K = (double *)malloc(s->nk * sizeof(double));
    if (!K)
        return nlse_fail(NLSE_ERR_NOMEM, "out of memory for the dipolar kernel");
    const size_t nh = s->L.n[2] / 2 + 1;
    const double invN = 1.0 / (double)s->L.N;
    for (size_t i = 0; i < s->L.n[0]; ++i)
        for (size_t j = 0; j < s->L.n[1]; ++j)
            for (size_t k = 0; k < nh; ++k)
                K[(i * s->L.n[1] + j) * nh + k] = dipolar_kernel_value(&s->p, &s->L, i, j, k) * invN;
    int st = upload(s, s->kern, K, s->nk);
    free(K);
    if (st)
        return st;
    s->p.dipolar = 1;
    return NLSE_OK;
}

/* density (when `want`) and Simpson norm of the current state into norm[0] */
template <typename T> int dipolar_prepare(nlse_dipolar *s, int want, int step)
{
    typedef typename Vec2<T>::T T2;
    Grid<T> G = grid_of<T>(s);
    const Dens<T> out = dens_of<T>(want ? (T *)s->dens : NULL, s->partial);
    const long long rows = (long long)s->L.n[0] * s->L.n[1];
    const int blocks = grid_for(rows, 1);
    if (s->is_real)
        k_prepare<T, T><<<blocks, BLK, 0, s->stream>>>((const T *)s->psi, G, out);
    else
        k_prepare<T, T2><<<blocks, BLK, 0, s->stream>>>((const T2 *)s->psi, G, out);
    dipolar_norm(s, blocks, step, NULL);
    CK(cudaGetLastError());
    return NLSE_OK;
}

/* d[q] *= K[q] for nk complex values of d, on the solver's stream */
template <typename T> int dipolar_kmul(nlse_dipolar *s, void *d, const void *K, long long nk)
{
    typedef typename Vec2<T>::T T2;
    k_kmul<T><<<grid_for(nk, 256), 256, 0, s->stream>>>((T2 *)d, (const T *)K, nk);
    CK(cudaGetLastError());
    return NLSE_OK;
}
template int dipolar_kmul<float>(nlse_dipolar *, void *, const void *, long long);
template int dipolar_kmul<double>(nlse_dipolar *, void *, const void *, long long);

/* cuFFT's in-place transforms of a real array by precision: forward (real
 * to complex) and back (complex to real) */
static cufftResult exec_fwd(cufftHandle p, double *d) { return cufftExecD2Z(p, d, (cufftDoubleComplex *)d); }
static cufftResult exec_fwd(cufftHandle p, float *d) { return cufftExecR2C(p, d, (cufftComplex *)d); }
static cufftResult exec_back(cufftHandle p, double *d) { return cufftExecZ2D(p, (cufftDoubleComplex *)d, d); }
static cufftResult exec_back(cufftHandle p, float *d) { return cufftExecC2R(p, (cufftComplex *)d, d); }

template <typename T> int dipolar_apply_fft(nlse_dipolar *s)
{
    const bool dbl = sizeof(T) == sizeof(double);
    CKS(dipolar_fft_check(exec_fwd(s->pf, (T *)s->dens), dbl ? "cufftExecD2Z" : "cufftExecR2C"));
    CKS(dipolar_kmul<T>(s, s->dens, s->kern, (long long)s->nk));
    CKS(dipolar_fft_check(exec_back(s->pb, (T *)s->dens), dbl ? "cufftExecZ2D" : "cufftExecC2R"));
    return NLSE_OK;
}

template int dipolar_prepare<float>(nlse_dipolar *, int, int);
template int dipolar_prepare<double>(nlse_dipolar *, int, int);
template int dipolar_apply_fft<float>(nlse_dipolar *);
template int dipolar_apply_fft<double>(nlse_dipolar *);

template <typename T> static int dipolar_of_state_t(nlse_dipolar *s)
{
    CKS(dipolar_prepare<T>(s, 1, -2));
    return dipolar_apply_fft<T>(s);
}

int dipolar_of_state(nlse_dipolar *s)
{
    if (!s->have_plans)
        return NLSE_OK;
    return s->p.dtype == NLSE_COMPLEX64 ? dipolar_of_state_t<float>(s)
                                        : dipolar_of_state_t<double>(s);
}
